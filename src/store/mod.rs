//! Stock stores: where a locked strategy's critical section reads the stock
//! and writes it back together with the order.
//!
//! The read and the write are separate on purpose: between them lies the
//! critical section that a lock must protect. Without a (working) lock two
//! buyers read the same value and both write `value - 1`: a lost update,
//! and one more order than the stock allowed.
//!
//! Both stores honour a fencing token when the lock hands one over: a read
//! records the token as the newest that has touched the stock, and a write
//! carrying an older token is refused. Recording at the read (not only at
//! the write) matters: otherwise a stale holder that wakes up and writes
//! *before* the new holder writes would still let both sell from one read.

pub mod pg_store;
pub mod redis_store;

use serde::{Deserialize, Serialize};

use crate::error::BackendError;
use crate::strategy::BuyCtx;

/// Which store holds a product's stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// `seckill:{id}:stock` in Redis; orders go through the stream.
    Redis,
    /// `products.stock` in PostgreSQL; orders inserted in the transaction.
    Postgres,
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Stock written and order recorded, atomically.
    Sold,
    /// Nothing written: the product was reset since the buy began.
    Reset,
    /// Nothing written: the buyer already holds `per_user_limit` units.
    LimitReached,
    /// Nothing written: a holder with a newer fencing token touched the
    /// stock since this one read it.
    Fenced,
}

/// Reads the stock, registering `fence` as the newest token if given.
pub async fn read(
    ctx: &BuyCtx<'_>,
    kind: StoreKind,
    fence: Option<u64>,
) -> Result<i64, BackendError> {
    match kind {
        StoreKind::Redis => redis_store::read(&mut ctx.redis.clone(), ctx.product, fence).await,
        StoreKind::Postgres => pg_store::read(ctx, fence).await,
    }
}

/// Writes `new_stock` and records the order in one atomic step.
pub async fn write(
    ctx: &BuyCtx<'_>,
    kind: StoreKind,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    match kind {
        StoreKind::Redis => {
            redis_store::write(
                ctx,
                &crate::product::keys::stock(ctx.product.id),
                new_stock,
                fence,
            )
            .await
        }
        StoreKind::Postgres => pg_store::write(ctx, new_stock, fence).await,
    }
}
