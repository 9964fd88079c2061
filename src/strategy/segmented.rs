//! `segmented`: the stock split over `segments` Redis keys, each guarded by
//! its own lock — the articles' answer to one hot lock (like
//! `ConcurrentHashMap`'s segments). A buyer starts at a segment chosen from
//! its user id and walks on when a segment is empty or busy; the product is
//! sold out only when every segment is.
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
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Outcome, StockLayout, Strategy, locked};
use crate::backends::Footprint;
use crate::backends::lease::{release_key, try_set};
use crate::backoff;
use crate::error::BackendError;
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::lock::{Lock, Token, Waiting};
use crate::product::{Product, StoreKind, keys};
use crate::sale::BuyCtx;
use crate::store::{self, Cell};

/// The segmented-stock strategy.
pub struct Segmented;

const INFO: Info = Info {
    id: "segmented",
    backend: "redis",
    store: StoreKind::Redis,
    mechanism: "stock split into K keys, each with its own SET NX PX lock; buyers start at a hashed segment and walk on",
    safe: true,
    safe_against: "many instances; high contention (K locks instead of one)",
    unsafe_against: "work that outlives lease_ms, as with redis-lock",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::Oversells),
    ],
};

/// Where a buyer starts: stable per user, spread over the segments.
fn first_segment(user: &str, segments: u32) -> u32 {
    let mut hasher = DefaultHasher::new();
    user.hash(&mut hasher);
    (hasher.finish() % u64::from(segments)) as u32
}

/// One segment's lock: a single `SET NX PX` try (a busy segment is walked
/// past, not waited for).
struct SegmentLock {
    key: String,
}

impl Lock for SegmentLock {
    type Guard = Token;

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        _deadline: Instant,
    ) -> Result<Option<Token>, BackendError> {
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
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let product = ctx.product;
        let segments = product.settings.segments.max(1);
        let start = first_segment(&ctx.order.user_id, segments);
        let deadline = Instant::now() + Duration::from_millis(product.settings.acquire_timeout_ms);
        if limit::already_reached(ctx, StoreKind::Redis).await? {
            return Ok(Outcome::LimitReached);
        }
        for attempt in 0.. {
            let mut stock_seen = false;
            for step in 0..segments {
                let k = (start + step) % segments;
                let cell = Cell::Redis(keys::segment(product.id, k));
                if store::read(ctx, &cell, None).await? <= 0 {
                    continue;
                }
                stock_seen = true;
                let lock = SegmentLock {
                    key: keys::segment_lock(product.id, k),
                };
                let Some(guard) = lock.acquire(ctx, deadline).await? else {
                    continue;
                };
                // Sold out under the lock means this segment emptied since
                // the read above: walk on.
                match locked::hold(INFO.id, &lock, ctx, guard, &cell).await? {
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

    fn layout(&self, product: &Product) -> StockLayout {
        StockLayout::Redis(
            (0..product.settings.segments.max(1))
                .map(|k| keys::segment(product.id, k))
                .collect(),
        )
    }

    fn footprint(&self, product: &Product) -> Footprint {
        let segments = 0..product.settings.segments.max(1);
        Footprint::redis(segments.map(|k| keys::segment_lock(product.id, k)))
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
