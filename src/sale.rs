//! What one buy carries through every layer that sells: the product, the
//! order it would record, and the connections. Here at the bottom so that
//! locks, stores and the per-buyer limit can take it without knowing which
//! strategy called them.

use std::time::Instant;

use crate::backends::Backends;
use crate::orders::Order;
use crate::product::Product;

/// Everything one buy needs.
pub struct BuyCtx<'a> {
    /// The instance's shared Redis connection (the buy path's lane):
    /// multiplexed, so every concurrent buy pipelines on it.
    pub redis: crate::backends::conn::RedisConn,
    /// When the buy began: spinning locks back off by how long it has
    /// waited.
    pub started: Instant,
    /// The product being bought, as configured by its last reset.
    pub product: &'a Product,
    /// The order that is recorded if the buy succeeds.
    pub order: &'a Order,
    /// Connections.
    pub backends: &'a Backends,
}
