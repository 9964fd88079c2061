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
pub mod db_pessimistic;
pub mod locked;
pub mod naive;
pub mod redis_lua;
pub mod section;
pub mod segmented;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;

use crate::error::BackendError;
use crate::lock;
use crate::orders::Order;
use crate::product::{Product, keys};
use crate::store::StoreKind;

/// Where a product's stock lives, as its strategy lays it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StockLayout {
    /// Redis counters; the stock is split evenly over them (one key for
    /// most strategies, one per segment for `segmented`).
    Redis(Vec<String>),
    /// `products.stock`.
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
    pub store: StoreKind,
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
    /// The buyer already holds `per_user_limit` units; nothing was sold.
    LimitReached,
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

    /// The outcome's name in metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sold => "sold",
            Self::SoldOut => "sold_out",
            Self::LimitReached => "limit_reached",
            Self::Busy { .. } => "busy",
        }
    }
}

/// The connections every strategy may use.
#[derive(Clone)]
pub struct Backends {
    /// Pooled multiplexed Redis connections.
    pub redis: deadpool_redis::Pool,
    /// The same Redis, for what a pool cannot do (Pub/Sub subscriptions).
    pub redis_client: redis::Client,
    /// Pooled PostgreSQL connections.
    pub pg: sqlx::PgPool,
    /// The independent RedLock masters.
    pub redlock: Arc<Vec<lock::redlock::Master>>,
    /// ZooKeeper session, when configured.
    pub zookeeper: Option<zookeeper_client::Client>,
}

/// Everything one buy needs.
pub struct BuyCtx<'a> {
    /// A Redis connection taken from the pool once for the whole buy.
    /// Multiplexed, so clones share it; taking it once matters because
    /// deadpool-redis pings a connection on every checkout.
    pub redis: redis::aio::MultiplexedConnection,
    /// When the buy began: spinning locks back off by how long it has
    /// waited.
    pub started: std::time::Instant,
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

    /// Where the product's stock lives: the product's `store` setting, or
    /// this strategy's own backend.
    fn layout(&self, product: &Product) -> StockLayout {
        match store_of(self.info(), product) {
            StoreKind::Redis => StockLayout::Redis(vec![keys::stock(product.id)]),
            StoreKind::Postgres => StockLayout::Postgres,
        }
    }
}

/// The store a product uses under a strategy: its `store` setting, or the
/// strategy's own.
pub fn store_of(info: &Info, product: &Product) -> StoreKind {
    product.settings.store.unwrap_or(info.store)
}

/// All strategies, in catalogue order (unsafe first, then the locks, the
/// database strategies and the atomic ones).
pub struct Registry {
    /// Fourteen entries: a linear search by id is cheaper than hashing.
    all: Vec<Arc<dyn Strategy>>,
}

impl Registry {
    /// Every strategy this build knows. Adding one is one line here.
    pub fn new() -> Self {
        Self {
            all: vec![
                Arc::new(naive::Naive),
                lock::local_mutex::strategy(),
                lock::setnx_naive::strategy(),
                lock::redis_lock::strategy(),
                lock::redisson::strategy(),
                lock::fenced::strategy(),
                lock::redlock::strategy(),
                lock::zookeeper::strategy(),
                lock::db_lock_table::strategy(),
                Arc::new(db_pessimistic::DbPessimistic),
                Arc::new(db_optimistic::DbOptimistic),
                Arc::new(db_atomic::DbAtomic),
                Arc::new(redis_lua::RedisLua),
                Arc::new(segmented::Segmented),
            ],
        }
    }

    /// The strategy with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Strategy>> {
        self.all.iter().find(|s| s.info().id == id)
    }

    /// Catalogue entries, in catalogue order.
    pub fn infos(&self) -> Vec<Info> {
        self.all.iter().map(|s| s.info().clone()).collect()
    }

    /// The ids, for error messages.
    pub fn ids(&self) -> Vec<&'static str> {
        self.all.iter().map(|s| s.info().id).collect()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}
