//! `segmented`: the stock split over `segments` Redis keys, each guarded by
//! its own lock — the articles' answer to one hot lock (like
//! `ConcurrentHashMap`'s segments). A buyer starts at a segment chosen from
//! its user id and walks on when a segment is empty or busy; the product is
//! sold out only when every segment is.
//!
//! Each segment lives in a place of its own (`keys::Place::segment`): on
//! a Redis Cluster the segments spread evenly over the masters, so K
//! segments are K locks on up to K cores, not K keys on one. Its sale
//! records the order in its own place's stream and checks its own copy
//! of the reset epoch; the per-buyer limit is claimed at the product's
//! home first (see `limit`).
//!
//! Each segment is the shared critical section under a one-try lease lock
//! (`SegmentLock`), held through [`locked::hold`] like every locked
//! strategy.
//!
//! Known failure: none for correctness while each segment's lock holds
//! (same lease caveat as `redis-lock`). The price is fragmentation: near
//! the end, buyers walk over empty segments.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Strategy, locked};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::backends::lease::{release_key, try_set};
use crate::model::backoff;
use crate::model::info::{self, Info};
use crate::model::order::Order;
use crate::model::product::keys::Place;
use crate::model::product::keys::RedisCell;
use crate::model::product::{Product, keys};
use crate::model::seam::{Added, Addition, BuyCtx, Mark, Outcome, Store};
use crate::stock::limit;
use crate::stock::lock::{Acquired, Lock, Token, Waiting};
use crate::stock::store::redis_store::RedisStore;

/// The segmented-stock strategy.
pub struct Segmented;

/// Where a buyer starts: stable per user, spread over the segments.
fn first_segment(user: &str, segments: u32) -> u32 {
    let mut hasher = DefaultHasher::new();
    user.hash(&mut hasher);
    (hasher.finish() % u64::from(segments)) as u32
}

/// Segment `k`'s counter, in its own place; the buyer was counted at
/// home already.
fn cell(product: &Product, k: u32) -> RedisCell {
    let segments = product.settings.segments.max(1);
    RedisCell {
        key: keys::segment(product.id, k, segments),
        place: Place::segment(product.id, k, segments),
        counts_buyer: false,
    }
}

/// Walks the segments from the buyer's own until one sells, all are
/// empty, or `acquire_timeout_ms` passes with every segment that has
/// stock locked.
async fn walk(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let product = ctx.product;
    let segments = product.settings.segments.max(1);
    let start = first_segment(&ctx.order.user_id, segments);
    let deadline = Instant::now() + Duration::from_millis(product.settings.acquire_timeout_ms);
    for attempt in 0.. {
        let mut stock_seen = false;
        for step in 0..segments {
            let k = (start + step) % segments;
            if ctx.store.read(ctx, k as usize, None).await? <= 0 {
                continue;
            }
            stock_seen = true;
            let lock = SegmentLock {
                key: keys::segment_lock(product.id, k, segments),
            };
            let Some(guard) = lock.acquire(ctx, deadline).await? else {
                continue;
            };
            // Sold out under the lock means this segment emptied since
            // the read above: walk on.
            match locked::hold("segmented", &lock, ctx, guard, k as usize).await? {
                Outcome::SoldOut => continue,
                outcome => return Ok(outcome),
            }
        }
        if !stock_seen {
            return Ok(Outcome::SoldOut);
        }
        if Instant::now() >= deadline {
            return Ok(Outcome::busy(
                "every segment with stock was locked until acquire_timeout_ms",
            ));
        }
        tokio::time::sleep(backoff::delay(attempt, deadline)).await;
    }
    unreachable!("the loop above only ends by returning")
}

/// Releases the segment locks `guards` hold (best effort: a lock not
/// released expires with its lease).
async fn release_all(ctx: &BuyCtx<'_>, locks: &[SegmentLock], guards: Vec<Token>) {
    for (lock, guard) in locks.iter().zip(guards) {
        if let Err(error) = lock.release(ctx, guard).await {
            tracing::warn!(%error, product = ctx.product.id, "segment lock release failed");
        }
    }
}

/// One segment's lock: a single `SET NX PX` try (a busy segment is walked
/// past, not waited for).
struct SegmentLock {
    key: String,
}

impl Lock for SegmentLock {
    type Guard = Token;

    async fn acquire(&self, ctx: &BuyCtx<'_>, _deadline: Instant) -> Acquired<Token> {
        let token = Uuid::new_v4().to_string();
        let lease = ctx.product.settings.lease_ms;
        let took = try_set(&mut ctx.redis.clone(), &self.key, &token, lease).await?;
        Ok(took.then_some(Token(token)))
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: Token) -> Result<(), BackendError> {
        release_key(&mut ctx.redis.clone(), &self.key, &guard.0).await
    }

    fn waiting(&self) -> Waiting {
        Waiting::FailFast
    }
}

impl Strategy for Segmented {
    fn info(&self) -> &'static Info {
        info::entry("segmented")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        // The buyer's unit is claimed at home first: the segments live in
        // other slots (see `limit`).
        if !limit::claim_at_home(ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        let outcome = walk(ctx).await;
        match &outcome {
            Ok(Outcome::Sold { .. }) | Err(BackendError::OutcomeUnknown(_)) => {}
            Ok(_) | Err(_) => limit::give_back(ctx).await,
        }
        outcome
    }

    /// Each segment's units under the lock of that segment.
    async fn restock(
        &self,
        ctx: &BuyCtx<'_>,
        orders: &[Order],
        once: bool,
    ) -> Result<usize, BackendError> {
        let segments = ctx.product.settings.segments.max(1);
        let mut back = 0;
        for (k, orders) in super::by_cell(ctx.store, orders) {
            let lock = SegmentLock {
                key: keys::segment_lock(ctx.product.id, k as u32, segments),
            };
            let put = ctx.store.restock(ctx, k, &orders, once);
            back += locked::under_lock(&lock, ctx, put).await?;
        }
        Ok(back)
    }

    /// Under the lock of the segment the addition goes to.
    async fn add(&self, ctx: &BuyCtx<'_>, addition: Addition) -> Result<Added, BackendError> {
        let k = ctx.store.cell_of(addition.id);
        let lock = SegmentLock {
            key: keys::segment_lock(
                ctx.product.id,
                k as u32,
                ctx.product.settings.segments.max(1),
            ),
        };
        locked::under_lock(&lock, ctx, ctx.store.add(ctx, k, addition)).await
    }

    /// Under every segment's lock, taken in order: no sale and no
    /// put-back moves a counter while they are all set.
    async fn repair(
        &self,
        ctx: &BuyCtx<'_>,
        expected: Mark,
        stock: i64,
    ) -> Result<bool, BackendError> {
        let segments = ctx.product.settings.segments.max(1);
        let deadline =
            Instant::now() + Duration::from_millis(ctx.product.settings.acquire_timeout_ms);
        let locks: Vec<SegmentLock> = (0..segments)
            .map(|k| SegmentLock {
                key: keys::segment_lock(ctx.product.id, k, segments),
            })
            .collect();
        let mut guards = Vec::new();
        for lock in &locks {
            loop {
                if let Some(guard) = lock.acquire(ctx, deadline).await? {
                    guards.push(guard);
                    break;
                }
                if Instant::now() >= deadline {
                    release_all(ctx, &locks, guards).await;
                    return Err(BackendError::Unavailable(
                        "the segments' locks were not acquired within acquire_timeout_ms".into(),
                    ));
                }
                tokio::time::sleep(ctx.store.recheck_every()).await;
            }
        }
        let set = ctx.store.set_stock(ctx, expected, stock).await;
        release_all(ctx, &locks, guards).await;
        set
    }

    /// One counter per segment, each in its own place.
    fn store(&self, product: &Product) -> Arc<dyn Store> {
        let segments = product.settings.segments.max(1);
        Arc::new(RedisStore::new(
            (0..segments).map(|k| cell(product, k)).collect(),
        ))
    }

    /// The segments' counters, their locks, and the epoch copies of the
    /// places away from home (the reset writes the current ones again).
    fn footprint(&self, product: &Product) -> Footprint {
        let segments = product.settings.segments.max(1);
        let id = product.id;
        let locks = (0..segments).map(|k| keys::segment_lock(id, k, segments));
        let epochs = (1..segments)
            .map(|k| Place::segment(id, k, segments))
            .filter(|place| *place != Place::home(id))
            .map(Place::epoch);
        self.store(product)
            .footprint(product)
            .and(Footprint::redis(locks.chain(epochs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buyers_spread_over_segments() {
        let mut hits = [0u32; 8];
        for i in 0..800 {
            hits[first_segment(&format!("user-{i}"), 8) as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 50), "{hits:?}");
        assert_eq!(first_segment("same", 8), first_segment("same", 8));
    }
}
