//! The registry of stores: the one place that chooses a store by kind.

use std::marker::PhantomData;
use std::sync::Arc;

use super::mysql::Mysql;
use super::postgres::Pg;
use super::redis_store::RedisStore;
use super::sql_store::SqlStore;
use crate::model::product::keys::RedisCell;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::Store;

/// The store `kind` laid out for `product` with its one counter (a
/// strategy that spreads the stock, `segmented`, builds its own
/// [`RedisStore`]).
pub fn open(kind: StoreKind, product: &Product) -> Arc<dyn Store> {
    match kind {
        StoreKind::Redis => Arc::new(RedisStore::new(vec![RedisCell::home(product)])),
        StoreKind::Postgres => Arc::new(SqlStore::<Pg>(PhantomData)),
        StoreKind::Mysql => Arc::new(SqlStore::<Mysql>(PhantomData)),
    }
}
