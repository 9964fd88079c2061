//! `fenced`: a Redis lease lock plus a fencing token from `INCR` on every
//! acquisition — Martin Kleppmann's answer to "How to do distributed
//! locking". The store refuses a write whose token is older than the newest
//! token that has touched the stock (see [`crate::stock::store`]).
//!
//! Known failure: a Redis failover that loses the fencing counter (the
//! promoted replica hands out a token again; `redis-failover`). A holder
//! frozen past its lease (GC pause, SIGSTOP) is not one: it wakes up and
//! writes, and the store sees that a newer holder
//! has already read the stock with a newer token and refuses the stale
//! write, so the frozen buyer gets `busy` instead of an oversold unit. The
//! lock alone still admits two holders; the fence is what keeps the data
//! safe.

use std::time::Instant;

use redis::AsyncCommands;

use super::redis_lock::RedisLock;
use super::{Acquired, Lock, Token};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::product::{Product, keys};
use crate::model::seam::BuyCtx;

/// Lease lock with fencing tokens: [`RedisLock`] plus an `INCR`.
pub struct Fenced;

/// A [`RedisLock`] guard and the fencing token taken with it.
pub struct FencedGuard {
    lease: Token,
    fence: u64,
}

impl Lock for Fenced {
    type Guard = FencedGuard;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<FencedGuard> {
        let Some(lease) = RedisLock.acquire(ctx, deadline).await? else {
            return Ok(None);
        };
        // Monotonic across every holder and instance: Redis INCR.
        let fence: u64 = ctx
            .redis
            .clone()
            .incr(keys::fence(ctx.product.id), 1)
            .await?;
        Ok(Some(FencedGuard { lease, fence }))
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: FencedGuard) -> Result<(), BackendError> {
        RedisLock.release(ctx, guard.lease).await
    }

    fn fence(guard: &FencedGuard) -> Option<u64> {
        Some(guard.fence)
    }

    fn footprint(&self, product: &Product) -> Footprint {
        RedisLock
            .footprint(product)
            .and(Footprint::redis([keys::fence(product.id)]))
    }
}
