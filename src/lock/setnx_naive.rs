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

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::AsyncCommands;

use super::{Guard, Lock, Waiting};
use crate::error::BackendError;
use crate::product::keys;
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `setnx-naive` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "setnx-naive",
            backend: "redis",
            store: StoreKind::Redis,
            mechanism: "SETNX then EXPIRE as a second command, fixed value, unconditional DEL, fail fast",
            safe: false,
            safe_against: "concurrent buyers whose work is shorter than the TTL",
            unsafe_against: "work that outlives the TTL (it deletes another holder's lock); a crash between SETNX and EXPIRE (the lock never expires)",
        },
        SetnxNaive,
    )
}

/// The naive SETNX lock.
pub struct SetnxNaive;

impl Lock for SetnxNaive {
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
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
            Ok(Some(Guard::with_token("1".into())))
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            // Unconditional: whoever holds the lock now loses it.
            let _: i64 = ctx.redis.clone().del(keys::lock(ctx.product.id)).await?;
            Ok(())
        }
        .boxed()
    }

    fn waiting(&self) -> Waiting {
        Waiting::FailFast
    }
}
