//! A lock composed with the shared critical section: the shape of every
//! locked strategy. Each lock's own file (in `src/lock/`) says what it
//! reproduces and describes its strategy; the catalogue puts the two
//! together with [`Locked::new`].

use std::time::{Duration, Instant};

use super::{Outcome, Strategy, section, store_of};
use crate::backends::{Backends, Footprint};
use crate::error::BackendError;
use crate::info::Info;
use crate::limit;
use crate::lock::{Lock, Reading, Waiting};
use crate::product::{Product, StoreKind};
use crate::sale::BuyCtx;
use crate::store::{self, Cell};
use crate::telemetry;

/// How long a waiter waits for the lock before re-reading the stock. A
/// PostgreSQL read costs a pooled connection that the holder may need, so
/// waiters on a database store re-read ten times less often.
fn recheck_every(kind: StoreKind) -> Duration {
    match kind {
        StoreKind::Redis => Duration::from_millis(25),
        StoreKind::Postgres | StoreKind::Mysql => Duration::from_millis(250),
    }
}

/// A strategy made of a lock around [`section::run`].
pub struct Locked<L> {
    info: Info,
    lock: L,
}

impl<L: Lock> Locked<L> {
    /// The strategy `info` describes, locking with `lock`.
    pub fn new(info: Info, lock: L) -> Self {
        Self { info, lock }
    }
}

/// Runs the critical section on `cell` while `guard` is held (recording
/// how long the buyer waited and held), then releases the lock. Shared by
/// [`Locked`] and the segment locks of `segmented`.
pub async fn hold<L: Lock>(
    strategy: &'static str,
    lock: &L,
    ctx: &BuyCtx<'_>,
    guard: L::Guard,
    cell: &Cell,
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

impl<L: Lock> Strategy for Locked<L> {
    fn info(&self) -> &Info {
        &self.info
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let kind = store_of(&self.info, ctx.product);
        if limit::already_reached(ctx, kind).await? {
            return Ok(Outcome::LimitReached);
        }
        let cell = Cell::of(kind, ctx.product);
        let deadline =
            Instant::now() + Duration::from_millis(ctx.product.settings.acquire_timeout_ms);
        let guard = loop {
            // A waiter re-reads the stock between slices of waiting: once
            // the product is sold out there is nothing to wait for. Only a
            // hint — the section re-checks under the lock.
            if store::read(ctx, &cell, None).await? <= 0 {
                return Ok(Outcome::SoldOut);
            }
            let until = match self.lock.waiting() {
                Waiting::Sliced => deadline.min(Instant::now() + recheck_every(kind)),
                Waiting::Queued | Waiting::FailFast => deadline,
            };
            if let Some(guard) = self.lock.acquire(ctx, until).await? {
                break guard;
            }
            if self.lock.waiting() != Waiting::Sliced || Instant::now() >= deadline {
                return Ok(Outcome::busy("lock not acquired within acquire_timeout_ms"));
            }
        };
        hold(self.info.id, &self.lock, ctx, guard, &cell).await
    }

    fn footprint(&self, product: &Product) -> Footprint {
        let kind = store_of(&self.info, product);
        store::footprint(kind, product).and(self.lock.footprint(product))
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
