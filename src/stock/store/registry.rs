//! The registry of stores: the one place that chooses a store by kind.

use std::sync::Arc;

use super::mysql_store::MysqlStore;
use super::pg_store::PgStore;
use super::redis_store::RedisStore;
use crate::model::product::keys::RedisCell;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::Store;

/// The store `kind` laid out for `product` with its one counter (a
/// strategy that spreads the stock, `segmented`, builds its own
/// [`RedisStore`]).
pub fn open(kind: StoreKind, product: &Product) -> Arc<dyn Store> {
    match kind {
        StoreKind::Redis => Arc::new(RedisStore::new(vec![RedisCell::home(product)])),
        StoreKind::Postgres => Arc::new(PgStore),
        StoreKind::Mysql => Arc::new(MysqlStore),
    }
}
