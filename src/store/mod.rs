//! Stock stores: where a critical section reads the stock and writes it
//! back together with the order.
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

pub mod mysql_store;
pub mod pg_store;
pub mod redis_store;
pub mod script;

use crate::backends::Footprint;
use crate::error::BackendError;
use crate::product::keys::Place;
use crate::product::{Product, StoreKind, keys};
use crate::sale::BuyCtx;
pub use script::Written;

/// One stock counter: what a critical section reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// A Redis counter (the product's, or one segment's).
    Redis(RedisCell),
    /// The product's `products.stock`.
    Postgres,
    /// The product's row in MySQL's `products`.
    Mysql,
}

/// A Redis counter and where the script that writes it finds the rest of
/// its keys (one place, one cluster slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisCell {
    /// The counter.
    pub key: String,
    /// Its place: the epoch, order stream, buyer counts and fencing
    /// record the selling script uses.
    pub place: Place,
    /// Whether the selling script checks and counts the per-buyer limit.
    /// False where the buyer's unit was claimed beforehand at the
    /// product's home ([`crate::limit::claim_at_home`]): a segment away
    /// from home cannot count the buyer in the same atomic step.
    pub counts_buyer: bool,
}

impl RedisCell {
    /// The product's one counter, at home, counting buyers.
    pub fn home(product: &Product) -> Self {
        Self {
            key: keys::stock(product.id),
            place: Place::home(product.id),
            counts_buyer: true,
        }
    }
}

impl Cell {
    /// The product's whole stock in `kind`.
    pub fn of(kind: StoreKind, product: &Product) -> Self {
        match kind {
            StoreKind::Redis => Self::Redis(RedisCell::home(product)),
            StoreKind::Postgres => Self::Postgres,
            StoreKind::Mysql => Self::Mysql,
        }
    }
}

/// What a store keeps for a product besides the stock it is reset with.
pub fn footprint(kind: StoreKind, product: &Product) -> Footprint {
    match kind {
        StoreKind::Redis => Footprint::redis([keys::fence_seen(product.id)]),
        StoreKind::Postgres | StoreKind::Mysql => Footprint::default(),
    }
}

/// Reads the stock, registering `fence` as the newest token if given.
pub async fn read(ctx: &BuyCtx<'_>, cell: &Cell, fence: Option<u64>) -> Result<i64, BackendError> {
    match cell {
        Cell::Redis(cell) => redis_store::read(ctx, cell, fence).await,
        Cell::Postgres => pg_store::read(ctx, fence).await,
        Cell::Mysql => mysql_store::read(ctx, fence).await,
    }
}

/// Writes `new_stock` and records the order in one atomic step.
pub async fn write(
    ctx: &BuyCtx<'_>,
    cell: &Cell,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    match cell {
        Cell::Redis(cell) => redis_store::write(ctx, cell, new_stock, fence).await,
        Cell::Postgres => pg_store::write(ctx, new_stock, fence).await,
        Cell::Mysql => mysql_store::write(ctx, new_stock, fence).await,
    }
}
