//! `setnx-naive`: `SETNX lock 1`, then `PEXPIRE lock ttl` as a second
//! command, a fixed value, and an unconditional `DEL` in a finally-style
//! release; a buyer that finds the lock taken fails fast with `busy` — the
//! first Redis lock of most flash-sale tutorials.
//!
//! Known failures, both reproducible here:
//! - work that outlives the TTL: the lock expires, a second buyer takes it,
//!   and the first buyer's unconditional `DEL` then deletes the second
//!   buyer's lock, letting a third in — oversell;
//! - a crash between SETNX and EXPIRE leaves a lock with no TTL that
//!   nobody ever deletes: the product stalls. `crash_gap_ms` widens that
//!   gap so a kill lands in it every time.

use std::time::{Duration, Instant};

use redis::AsyncCommands;

use super::{Lock, Waiting};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::product::{Product, keys};
use crate::model::seam::BuyCtx;

/// The naive SETNX lock.
pub struct SetnxNaive;

impl Lock for SetnxNaive {
    /// Nothing: the lock's value is the same `1` for everybody.
    type Guard = ();

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        _deadline: Instant,
    ) -> Result<Option<()>, BackendError> {
        let mut conn = ctx.redis.clone();
        let key = keys::lock(ctx.product.id);
        let settings = &ctx.product.settings;
        if !conn.set_nx::<_, _, bool>(&key, "1").await? {
            return Ok(None);
        }
        if settings.crash_gap_ms > 0 {
            tokio::time::sleep(Duration::from_millis(settings.crash_gap_ms)).await;
        }
        let _: bool = conn.pexpire(&key, settings.lease_ms as i64).await?;
        Ok(Some(()))
    }

    async fn release(&self, ctx: &BuyCtx<'_>, _guard: ()) -> Result<(), BackendError> {
        // Unconditional: whoever holds the lock now loses it.
        let _: i64 = ctx.redis.clone().del(keys::lock(ctx.product.id)).await?;
        Ok(())
    }

    fn waiting(&self) -> Waiting {
        Waiting::FailFast
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint::redis([keys::lock(product.id)])
    }
}
