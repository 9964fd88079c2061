//! `fenced`: a Redis lease lock plus a fencing token from `INCR` on every
//! acquisition — Martin Kleppmann's answer to "How to do distributed
//! locking". The store refuses a write whose token is older than the newest
//! token that has touched the stock (see [`crate::store`]).
//!
//! Known failure: none for the stock. A holder frozen past its lease (GC
//! pause, SIGSTOP) wakes up and writes; the store sees that a newer holder
//! has already read the stock with a newer token and refuses the stale
//! write, so the frozen buyer gets `busy` instead of an oversold unit. The
//! lock alone still admits two holders; the fence is what keeps the data
//! safe.

use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::AsyncCommands;

use super::redis_lock::RedisLock;
use super::{Guard, Lock};
use crate::error::BackendError;
use crate::product::keys;
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `fenced` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "fenced",
            backend: "redis",
            store: StoreKind::Redis,
            mechanism: "SET NX PX lock plus a fencing token from INCR; the store refuses writes older than the newest token it has seen",
            safe: true,
            safe_against: "a holder frozen or slowed past its lease (its late write is refused)",
            unsafe_against: "nothing for the stock; a refused holder's buyer gets busy",
        },
        Fenced,
    )
}

/// Lease lock with fencing tokens: [`RedisLock`] plus an `INCR`.
pub struct Fenced;

impl Lock for Fenced {
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
            let Some(mut guard) = RedisLock.acquire(ctx, deadline).await? else {
                return Ok(None);
            };
            // Monotonic across every holder and instance: Redis INCR.
            let fence: u64 = ctx
                .redis
                .clone()
                .incr(keys::fence(ctx.product.id), 1)
                .await?;
            guard.fence = Some(fence);
            Ok(Some(guard))
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        RedisLock.release(ctx, guard)
    }
}
