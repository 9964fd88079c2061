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
use super::{Lock, Token};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::info::{ANY_STORE, Expect, Hazard, Info};
use crate::model::product::{Product, StoreKind, keys};
use crate::model::seam::BuyCtx;

/// The `fenced` strategy's catalogue entry.
pub const INFO: Info = Info {
    id: "fenced",
    backend: "redis",
    store: StoreKind::Redis,
    stores: ANY_STORE,
    mechanism: "SET NX PX lock plus a fencing token from INCR; the store refuses writes older than the newest token it has seen",
    safe: true,
    safe_against: "a holder frozen or slowed past its lease (its late write is refused)",
    unsafe_against: "a Redis failover that loses the fencing counter (the promoted replica issues a token again); a refused holder's buyer gets busy",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::NoOversell),
        (Hazard::FrozenHolder, Expect::NoOversell),
        (Hazard::HolderCrash, Expect::SellsAll),
        (Hazard::Partition, Expect::SellsAll),
        (Hazard::PartitionWithStore, Expect::SellsAll),
        (Hazard::Failover, Expect::Oversells),
    ],
    recipes: &[],
};

/// Lease lock with fencing tokens: [`RedisLock`] plus an `INCR`.
pub struct Fenced;

/// A [`RedisLock`] guard and the fencing token taken with it.
pub struct FencedGuard {
    lease: Token,
    fence: u64,
}

impl Lock for Fenced {
    type Guard = FencedGuard;

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        deadline: Instant,
    ) -> Result<Option<FencedGuard>, BackendError> {
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
