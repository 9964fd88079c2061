//! A lock composed with the shared critical section: the shape of every
//! locked strategy. Each lock's own file says what it reproduces.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{BuyCtx, Info, Outcome, Store, Strategy, section};
use crate::error::BackendError;
use crate::lock::{Lock, local_mutex::LocalMutex, redis_lock::RedisLock};
use crate::store;

/// How long a waiter waits for the lock before re-reading the stock.
const RECHECK_EVERY: Duration = Duration::from_millis(25);

/// A strategy made of a lock around [`section::run`].
pub struct Locked<L> {
    info: Info,
    lock: L,
}

impl<L: Lock> Locked<L> {
    async fn buy_locked(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let deadline =
            Instant::now() + Duration::from_millis(ctx.product.settings.acquire_timeout_ms);
        let guard = loop {
            // A waiter re-reads the stock between slices of waiting: once
            // the product is sold out there is nothing to queue for. Only a
            // hint — the section re-checks under the lock.
            let stock = {
                let mut conn = ctx.redis.clone();
                store::read(&mut conn, ctx.product.id).await?
            };
            if stock <= 0 {
                return Ok(Outcome::SoldOut);
            }
            let slice = deadline.min(Instant::now() + RECHECK_EVERY);
            if let Some(guard) = self.lock.acquire(ctx, slice).await? {
                break guard;
            }
            if Instant::now() >= deadline {
                return Ok(Outcome::busy("lock not acquired within acquire_timeout_ms"));
            }
        };
        let outcome = section::run(ctx).await;
        if let Err(error) = self.lock.release(ctx, guard).await {
            // The sale (if any) is already recorded whole; a failed release
            // only delays the next holder until the lease runs out.
            tracing::warn!(%error, product = ctx.product.id, "lock release failed");
        }
        outcome
    }
}

impl<L: Lock> Strategy for Locked<L> {
    fn info(&self) -> &Info {
        &self.info
    }

    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>> {
        self.buy_locked(ctx).boxed()
    }
}

/// `local-mutex`: see [`crate::lock::local_mutex`].
pub fn local_mutex() -> Arc<dyn Strategy> {
    Arc::new(Locked {
        info: Info {
            id: "local-mutex",
            backend: "redis",
            store: Store::Redis,
            mechanism: "in-process mutex per product (\"synchronized\") around GET, check, SET",
            safe: false,
            safe_against: "concurrent buyers on one instance",
            unsafe_against: "more than one instance: each has its own mutex",
        },
        lock: LocalMutex::default(),
    })
}

/// `redis-lock`: see [`crate::lock::redis_lock`].
pub fn redis_lock() -> Arc<dyn Strategy> {
    Arc::new(Locked {
        info: Info {
            id: "redis-lock",
            backend: "redis",
            store: Store::Redis,
            mechanism: "SET key uuid NX PX ttl; Lua compare-and-delete release; bounded retry with backoff",
            safe: true,
            safe_against: "many instances; a holder that finishes within its lease",
            unsafe_against: "work that outlives lease_ms (the lock expires under the holder)",
        },
        lock: RedisLock,
    })
}
