//! Strategies: the ways to sell one unit of a hot product, chosen per
//! product by id from the [`catalogue`].
//!
//! Locked strategies are a [`crate::stock::lock::Lock`] composed with the shared
//! critical section in [`section`] ([`locked::Locked`]), on whichever
//! store holds the stock; `naive` runs the same section with no lock at
//! all. The others do their own thing: `redis-lua` and `redis-group` in
//! one Lua script (the group ones through [`group::Grouped`]); `db-atomic`, `db-pessimistic`,
//! `db-optimistic` and `db-transaction` in SQL, in the dialect of the
//! database that holds the row ([`crate::model::seam::Rows`]); `db-group` in one
//! PostgreSQL transaction per group (through [`group::Grouped`] too); `segmented` spreads the stock over K
//! counters, each under its own lock.
//!
//! Two traits: a strategy implements [`Strategy`] with native `async fn`
//! (static, no boxing); the catalogue holds them as `dyn` [`Sells`], whose
//! blanket impl boxes the future once per buy. The product's strategy is
//! chosen at run time from its stored id, and native `async fn` in traits
//! is not object safe; one allocation per buy is noise next to a network
//! round trip.

pub mod catalogue;
pub mod db_atomic;
pub mod db_group;
pub mod db_optimistic;
pub mod db_pessimistic;
pub mod db_transaction;
pub mod group;
pub mod locked;
pub mod naive;
pub mod redis_group;
pub mod redis_lua;
pub mod section;
pub mod segmented;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::info::Info;
use crate::model::order::Order;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{Added, Addition, BuyCtx, Mark, Outcome, Store};
use crate::stock::lock::Reading;
use crate::stock::store::registry;
pub use catalogue::Catalogue;

/// A way to sell one unit.
pub trait Strategy: Send + Sync {
    /// The catalogue entry.
    fn info(&self) -> &'static Info;

    /// Tries to sell one unit of `ctx.product` and record `ctx.order`.
    fn buy(&self, ctx: &BuyCtx<'_>) -> impl Future<Output = Result<Outcome, BackendError>> + Send;

    /// Whether a buy cut off part-way (its client gone, the request timed
    /// out) leaves nothing half done: the sale is one atomic step that has
    /// either reached the store whole or not at all, with no lock to
    /// release. Such a buy without an Idempotency-Key to settle runs in
    /// its request's task; every other buy gets a task of its own, which
    /// costs a spawn and a hand-off per sale.
    fn one_step(&self) -> bool {
        false
    }

    /// Where the product's stock lives, laid out as this strategy sells
    /// it: the store the product's `store` setting names, or this
    /// strategy's own, with one counter.
    fn store(&self, product: &Product) -> Arc<dyn Store> {
        registry::open(store_of(self.info(), product), product)
    }

    /// What it keeps per product (its store's counters and fences, lock
    /// keys, lock rows and nodes): a reset clears it.
    fn footprint(&self, product: &Product) -> Footprint {
        self.store(product).footprint(product)
    }

    /// What a stock query holds while it reads the product's ledger: the
    /// read side of the strategy's lock, where it has one.
    fn reading(
        &self,
        _backends: &Backends,
        _product: &Product,
    ) -> impl Future<Output = Result<Reading, BackendError>> + Send {
        async { Ok(Reading::Unlocked) }
    }

    /// Puts the units of `orders` back on sale ([`Store::restock`], each
    /// to its counter), guarded the way this strategy guards every stock
    /// write: the atomic strategies' writes are relative (or take the row
    /// lock), so the put-back needs nothing more; a locked one takes its
    /// lock first. How many went back.
    fn restock(
        &self,
        ctx: &BuyCtx<'_>,
        orders: &[Order],
        once: bool,
    ) -> impl Future<Output = Result<usize, BackendError>> + Send {
        restock_by_cell(ctx, orders, once)
    }

    /// An admin's addition to the live sale ([`Store::add`], to the
    /// counter its id picks), guarded as [`Strategy::restock`] is.
    fn add(
        &self,
        ctx: &BuyCtx<'_>,
        addition: Addition,
    ) -> impl Future<Output = Result<Added, BackendError>> + Send {
        ctx.store.add(ctx, ctx.store.cell_of(addition.id), addition)
    }

    /// Reconciliation's repair ([`Store::set_stock`]), guarded as
    /// [`Strategy::restock`] is.
    fn repair(
        &self,
        ctx: &BuyCtx<'_>,
        expected: Mark,
        stock: i64,
    ) -> impl Future<Output = Result<bool, BackendError>> + Send {
        ctx.store.set_stock(ctx, expected, stock)
    }
}

/// [`Store::restock`] for `orders`, one call per counter they go back to.
pub async fn restock_by_cell(
    ctx: &BuyCtx<'_>,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    let mut back = 0;
    for (cell, orders) in by_cell(ctx.store, orders) {
        back += ctx.store.restock(ctx, cell, &orders, once).await?;
    }
    Ok(back)
}

/// `orders` by the counter each one's unit goes back to.
pub fn by_cell(store: &dyn Store, orders: &[Order]) -> BTreeMap<usize, Vec<Order>> {
    let mut cells: BTreeMap<usize, Vec<Order>> = BTreeMap::new();
    for order in orders {
        cells
            .entry(store.cell_of(order.order_id))
            .or_default()
            .push(order.clone());
    }
    cells
}

/// The store a product uses under a strategy: its `store` setting, or the
/// strategy's own.
pub fn store_of(info: &Info, product: &Product) -> StoreKind {
    product.settings.store.unwrap_or(info.store)
}

/// The object-safe face of a [`Strategy`], as the catalogue holds it.
pub trait Sells: Send + Sync {
    /// See [`Strategy::info`].
    fn info(&self) -> &'static Info;
    /// See [`Strategy::buy`]; the future boxed.
    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>>;
    /// See [`Strategy::one_step`].
    fn one_step(&self) -> bool;
    /// See [`Strategy::store`].
    fn store(&self, product: &Product) -> Arc<dyn Store>;
    /// See [`Strategy::footprint`].
    fn footprint(&self, product: &Product) -> Footprint;
    /// See [`Strategy::reading`]; the future boxed.
    fn reading<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
    ) -> BoxFuture<'a, Result<Reading, BackendError>>;
    /// See [`Strategy::restock`]; the future boxed.
    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        orders: &'a [Order],
        once: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>>;
    /// See [`Strategy::add`]; the future boxed.
    fn add<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        addition: Addition,
    ) -> BoxFuture<'a, Result<Added, BackendError>>;
    /// See [`Strategy::repair`]; the future boxed.
    fn repair<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> BoxFuture<'a, Result<bool, BackendError>>;
}

impl<S: Strategy> Sells for S {
    fn info(&self) -> &'static Info {
        Strategy::info(self)
    }

    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>> {
        Box::pin(Strategy::buy(self, ctx))
    }

    fn one_step(&self) -> bool {
        Strategy::one_step(self)
    }

    fn store(&self, product: &Product) -> Arc<dyn Store> {
        Strategy::store(self, product)
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Strategy::footprint(self, product)
    }

    fn reading<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
    ) -> BoxFuture<'a, Result<Reading, BackendError>> {
        Box::pin(Strategy::reading(self, backends, product))
    }

    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        orders: &'a [Order],
        once: bool,
    ) -> BoxFuture<'a, Result<usize, BackendError>> {
        Box::pin(Strategy::restock(self, ctx, orders, once))
    }

    fn add<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        addition: Addition,
    ) -> BoxFuture<'a, Result<Added, BackendError>> {
        Box::pin(Strategy::add(self, ctx, addition))
    }

    fn repair<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> BoxFuture<'a, Result<bool, BackendError>> {
        Box::pin(Strategy::repair(self, ctx, expected, stock))
    }
}
