//! Strategies: the ways to sell one unit of a hot product, chosen per
//! product by id from one [`Registry`].
//!
//! Locked strategies are a [`crate::lock::Lock`] composed with the shared
//! critical section in [`section`]; the atomic ones (`redis-lua`,
//! `db-atomic`, `db-optimistic`) do their own thing in one step.
//!
//! Dispatch is through `Arc<dyn Strategy>` with boxed futures: the product's
//! strategy is chosen at run time from its stored id, and native `async fn`
//! in traits is not object safe. One allocation per buy is noise next to a
//! network round trip.

pub mod db_atomic;
pub mod db_optimistic;
pub mod locked;
pub mod naive;
pub mod redis_lua;
pub mod section;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;

use crate::error::BackendError;
use crate::orders::Order;
use crate::product::Product;

/// Where a strategy keeps its stock counter (and so where `remaining` is
/// read from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Store {
    /// `seckill:{id}:stock` in Redis; orders go through the stream.
    Redis,
    /// `products.stock` in PostgreSQL; orders inserted in the transaction.
    Postgres,
}

/// What the catalogue (`GET /strategies`) says about a strategy.
#[derive(Debug, Clone, Serialize)]
pub struct Info {
    /// Registry id, as used in the reset body.
    pub id: &'static str,
    /// The backends the mechanism involves.
    pub backend: &'static str,
    /// Where the stock counter lives.
    pub store: Store,
    /// One line: how it protects the counter.
    pub mechanism: &'static str,
    /// Whether it is expected never to oversell at default settings on
    /// several instances; `seckill race` fails when a safe one oversells.
    pub safe: bool,
    /// The failures it survives.
    pub safe_against: &'static str,
    /// The failures it does not survive.
    pub unsafe_against: &'static str,
}

/// The result of one buy attempt that did not fail in a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The order was recorded.
    Sold,
    /// No stock left.
    SoldOut,
    /// Gave up (lock not acquired in time, retries exhausted, product reset
    /// mid-buy); the client may retry after `retry_after`.
    Busy {
        /// Why, for the error message.
        reason: &'static str,
        /// The hint sent as `Retry-After`.
        retry_after: Duration,
    },
}

impl Outcome {
    /// A `busy` outcome with a one-second retry hint.
    pub fn busy(reason: &'static str) -> Self {
        Self::Busy {
            reason,
            retry_after: Duration::from_secs(1),
        }
    }
}

/// The connections every strategy may use.
#[derive(Clone)]
pub struct Backends {
    /// Pooled multiplexed Redis connections.
    pub redis: deadpool_redis::Pool,
    /// Pooled PostgreSQL connections.
    pub pg: sqlx::PgPool,
}

/// Everything one buy needs.
pub struct BuyCtx<'a> {
    /// A Redis connection taken from the pool once for the whole buy.
    /// Multiplexed, so clones share it; taking it once matters because
    /// deadpool-redis pings a connection on every checkout.
    pub redis: redis::aio::MultiplexedConnection,
    /// The product being bought, as configured by its last reset.
    pub product: &'a Product,
    /// The order that is recorded if the buy succeeds.
    pub order: &'a Order,
    /// Connections.
    pub backends: &'a Backends,
}

/// A way to sell one unit.
pub trait Strategy: Send + Sync {
    /// The catalogue entry.
    fn info(&self) -> &Info;
    /// Tries to sell one unit of `ctx.product` and record `ctx.order`.
    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>>;
}

/// All strategies by id.
pub struct Registry {
    by_id: BTreeMap<&'static str, Arc<dyn Strategy>>,
}

impl Registry {
    /// Every strategy this build knows. Adding one is one line here.
    pub fn new() -> Self {
        let all: Vec<Arc<dyn Strategy>> = vec![
            Arc::new(naive::Naive),
            locked::local_mutex(),
            locked::redis_lock(),
            Arc::new(redis_lua::RedisLua),
            Arc::new(db_optimistic::DbOptimistic),
            Arc::new(db_atomic::DbAtomic),
        ];
        Self {
            by_id: all.into_iter().map(|s| (s.info().id, s)).collect(),
        }
    }

    /// The strategy with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Strategy>> {
        self.by_id.get(id)
    }

    /// Catalogue entries in registration order of ids (alphabetical).
    pub fn infos(&self) -> Vec<Info> {
        self.by_id.values().map(|s| s.info().clone()).collect()
    }

    /// The ids, for error messages and `--strategies` defaults.
    pub fn ids(&self) -> Vec<&'static str> {
        self.by_id.keys().copied().collect()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}
