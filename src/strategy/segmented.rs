//! `segmented`: the stock split over `segments` Redis keys, each guarded by
//! its own lock — the articles' answer to one hot lock (like
//! `ConcurrentHashMap`'s segments). A buyer starts at a segment chosen from
//! its user id and walks on when a segment is empty or busy; the product is
//! sold out only when every segment is.
//!
//! Known failure: none for correctness while each segment's lock holds
//! (same lease caveat as `redis-lock`). The price is fragmentation: near
//! the end, buyers walk over empty segments.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use uuid::Uuid;

use super::{BuyCtx, Info, Outcome, StockLayout, Strategy, section};
use crate::backoff;
use crate::error::BackendError;
use crate::limit;
use crate::lock::redis_lock::{release_key, try_set};
use crate::product::{Product, keys};
use crate::store::StoreKind;
use crate::store::Written;
use crate::store::redis_store::{read_key, write};
use crate::telemetry;

/// The segmented-stock strategy.
pub struct Segmented;

static INFO: Info = Info {
    id: "segmented",
    backend: "redis",
    store: StoreKind::Redis,
    mechanism: "stock split into K keys, each with its own SET NX PX lock; buyers start at a hashed segment and walk on",
    safe: true,
    safe_against: "many instances; high contention (K locks instead of one)",
    unsafe_against: "work that outlives lease_ms, as with redis-lock",
};

/// Where a buyer starts: stable per user, spread over the segments.
fn first_segment(user: &str, segments: u32) -> u32 {
    let mut hasher = DefaultHasher::new();
    user.hash(&mut hasher);
    (hasher.finish() % u64::from(segments)) as u32
}

impl Segmented {
    async fn buy_segment(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let product = ctx.product;
        let segments = product.settings.segments.max(1);
        let start = first_segment(&ctx.order.user_id, segments);
        let token = Uuid::new_v4().to_string();
        let deadline = Instant::now() + Duration::from_millis(product.settings.acquire_timeout_ms);
        if limit::already_reached(ctx, StoreKind::Redis).await? {
            return Ok(Outcome::LimitReached);
        }
        let mut conn = ctx.redis.clone();
        for attempt in 0.. {
            let mut stock_seen = false;
            for step in 0..segments {
                let k = (start + step) % segments;
                let stock_key = keys::segment(product.id, k);
                if read_key(&mut conn, &stock_key).await? <= 0 {
                    continue;
                }
                stock_seen = true;
                let lock_key = keys::segment_lock(product.id, k);
                if !try_set(&mut conn, &lock_key, &token, product.settings.lease_ms).await? {
                    continue;
                }
                let section = sell_from(ctx, &stock_key);
                let outcome = telemetry::holding(INFO.id, ctx.started, section).await;
                if let Err(error) = release_key(&mut conn, &lock_key, &token).await {
                    tracing::warn!(%error, product = product.id, segment = k, "segment release failed");
                }
                match outcome? {
                    Some(outcome) => return Ok(outcome),
                    None => continue,
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
}

/// The critical section on one segment, under its lock; `None` when the
/// segment turned out empty.
async fn sell_from(ctx: &BuyCtx<'_>, stock_key: &str) -> Result<Option<Outcome>, BackendError> {
    let stock = read_key(&mut ctx.redis.clone(), stock_key).await?;
    if stock <= 0 {
        return Ok(None);
    }
    section::work(ctx).await;
    Ok(Some(match write(ctx, stock_key, stock - 1, None).await? {
        Written::Sold => Outcome::Sold,
        Written::LimitReached => Outcome::LimitReached,
        Written::Reset | Written::Fenced => Outcome::busy("the product was reset during the buy"),
    }))
}

impl Strategy for Segmented {
    fn info(&self) -> &Info {
        &INFO
    }

    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>> {
        self.buy_segment(ctx).boxed()
    }

    fn layout(&self, product: &Product) -> StockLayout {
        StockLayout::Redis(
            (0..product.settings.segments.max(1))
                .map(|k| keys::segment(product.id, k))
                .collect(),
        )
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
