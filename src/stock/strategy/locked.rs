//! A lock composed with the shared critical section: the shape of every
//! locked strategy. Each lock's own file (in `src/lock/`) says what it
//! reproduces and describes its strategy; the catalogue puts the two
//! together with [`Locked::new`].

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Strategy, section};
use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::info::Info;
use crate::model::order::Order;
use crate::model::product::Product;
use crate::model::seam::{Added, Addition, BuyCtx, Mark, Outcome};
use crate::model::telemetry;
use crate::stock::limit;
use crate::stock::lock::{Lock, Reading, Waiting};

/// A strategy made of a lock around [`section::run`].
pub struct Locked<L> {
    info: &'static Info,
    lock: L,
}

impl<L: Lock> Locked<L> {
    /// The strategy `info` describes, locking with `lock`.
    pub fn new(info: &'static Info, lock: L) -> Self {
        Self { info, lock }
    }
}

/// Runs the critical section on the store's counter `cell` while `guard` is held (recording
/// how long the buyer waited and held), then releases the lock. Shared by
/// [`Locked`] and the segment locks of `segmented`.
pub async fn hold<L: Lock>(
    strategy: &'static str,
    lock: &L,
    ctx: &BuyCtx<'_>,
    guard: L::Guard,
    cell: usize,
) -> Result<Outcome, BackendError> {
    let section = section::run(ctx, cell, L::fence(&guard));
    let outcome = telemetry::holding(strategy, ctx.started, section).await;
    if let Err(error) = lock.release(ctx, guard).await {
        // The sale (if any) is already recorded whole; a failed release
        // only delays the next holder until the lease runs out.
        tracing::warn!(%error, product = ctx.product.id, "lock release failed");
    }
    outcome
}

/// Runs `step` holding `lock` (waiting up to `acquire_timeout_ms`), then
/// releases it; `busy` when the lock was not acquired in time.
pub async fn under_lock<L: Lock, T>(
    lock: &L,
    ctx: &BuyCtx<'_>,
    step: impl Future<Output = Result<T, BackendError>>,
) -> Result<T, BackendError> {
    let deadline = Instant::now() + Duration::from_millis(ctx.product.settings.acquire_timeout_ms);
    let guard = loop {
        let until = match lock.waiting() {
            Waiting::Sliced => deadline.min(Instant::now() + ctx.store.recheck_every()),
            Waiting::Queued | Waiting::FailFast => deadline,
        };
        if let Some(guard) = lock.acquire(ctx, until).await? {
            break guard;
        }
        if Instant::now() >= deadline {
            return Err(BackendError::Contended(
                "the product's lock was not acquired within acquire_timeout_ms; nothing was done"
                    .into(),
            ));
        }
        if lock.waiting() == Waiting::FailFast {
            tokio::time::sleep(ctx.store.recheck_every()).await;
        }
    };
    let done = step.await;
    if let Err(error) = lock.release(ctx, guard).await {
        tracing::warn!(%error, product = ctx.product.id, "lock release failed");
    }
    done
}

impl<L: Lock> Strategy for Locked<L> {
    fn info(&self) -> &'static Info {
        self.info
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        if limit::already_reached(ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        let deadline =
            Instant::now() + Duration::from_millis(ctx.product.settings.acquire_timeout_ms);
        let guard = loop {
            // A waiter re-reads the stock between slices of waiting: once
            // the product is sold out there is nothing to wait for. Only a
            // hint — the section re-checks under the lock.
            if ctx.store.read(ctx, 0, None).await? <= 0 {
                return Ok(Outcome::SoldOut);
            }
            let until = match self.lock.waiting() {
                Waiting::Sliced => deadline.min(Instant::now() + ctx.store.recheck_every()),
                Waiting::Queued | Waiting::FailFast => deadline,
            };
            if let Some(guard) = self.lock.acquire(ctx, until).await? {
                break guard;
            }
            if self.lock.waiting() != Waiting::Sliced || Instant::now() >= deadline {
                return Ok(Outcome::busy("lock not acquired within acquire_timeout_ms"));
            }
        };
        hold(self.info.id, &self.lock, ctx, guard, 0).await
    }

    fn footprint(&self, product: &Product) -> Footprint {
        self.store(product)
            .footprint(product)
            .and(self.lock.footprint(product))
    }

    /// Under the lock: the critical section writes back a value it read,
    /// so a put-back between its read and its write would be overwritten.
    async fn restock(
        &self,
        ctx: &BuyCtx<'_>,
        orders: &[Order],
        once: bool,
    ) -> Result<usize, BackendError> {
        under_lock(&self.lock, ctx, super::restock_by_cell(ctx, orders, once)).await
    }

    /// Under the lock, for the same reason as [`Strategy::restock`].
    async fn add(&self, ctx: &BuyCtx<'_>, addition: Addition) -> Result<Added, BackendError> {
        let cell = ctx.store.cell_of(addition.id);
        under_lock(&self.lock, ctx, ctx.store.add(ctx, cell, addition)).await
    }

    /// Under the lock, for the same reason as [`Strategy::restock`].
    async fn repair(
        &self,
        ctx: &BuyCtx<'_>,
        expected: Mark,
        stock: i64,
    ) -> Result<bool, BackendError> {
        under_lock(&self.lock, ctx, ctx.store.set_stock(ctx, expected, stock)).await
    }

    async fn reading(
        &self,
        backends: &Backends,
        product: &Product,
    ) -> Result<Reading, BackendError> {
        let deadline = Instant::now() + Duration::from_millis(product.settings.acquire_timeout_ms);
        self.lock.read(backends, product, deadline).await
    }
}
