//! `redlock`: Redis's RedLock — the same `SET NX PX` on N independent
//! masters; the lock is held when a quorum took it within its validity time
//! `TTL − elapsed − drift` (drift = 1 % of the TTL + 2 ms); otherwise every
//! master is released and the attempt retried after a random delay.
//! `quorum: "all"` turns it into the articles' MultiLock.
//!
//! Outcome here rather than with the `rslock` crate: the MultiLock variant
//! needs a quorum of all, and each master's connection
//! ([`crate::backends::redlock::Master`]) bounds every call by a short
//! timeout, so a dead master costs milliseconds, not a connect timeout.
//!
//! Known failure: safe with a minority of masters down. Like every lease
//! it is unsafe when the holder outlives the validity time (Kleppmann's
//! critique); with all masters required, one master down means no lock.

use std::time::{Duration, Instant};

use futures::future::join_all;
use rand::Rng;
use redis::aio::MultiplexedConnection;
use uuid::Uuid;

use super::{Acquired, Lock, Token};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::backends::lease::{release_key, try_set};
use crate::backends::redlock::PER_MASTER;
use crate::model::product::{Product, Quorum, keys};
use crate::model::seam::BuyCtx;

/// The RedLock lock.
pub struct RedLock;

/// Masters that must agree.
fn needed(quorum: Quorum, masters: usize) -> usize {
    match quorum {
        Quorum::Majority => masters / 2 + 1,
        Quorum::All => masters,
    }
}

/// Runs `op` on every master at once, each bounded by [`PER_MASTER`];
/// returns how many answered `true`.
async fn on_all_masters<F, Fut>(ctx: &BuyCtx<'_>, op: F) -> usize
where
    F: Fn(MultiplexedConnection) -> Fut + Copy,
    Fut: std::future::Future<Output = Result<bool, BackendError>>,
{
    let calls = ctx
        .backends
        .redlock
        .iter()
        .map(|master| tokio::time::timeout(PER_MASTER, master.run(op)));
    join_all(calls)
        .await
        .into_iter()
        .filter(|r| matches!(r, Ok(Ok(true))))
        .count()
}

async fn release_everywhere(ctx: &BuyCtx<'_>, key: &str, token: &str) {
    on_all_masters(ctx, |mut conn| async move {
        release_key(&mut conn, key, token).await?;
        Ok(true)
    })
    .await;
}

impl Lock for RedLock {
    type Guard = Token;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Token> {
        let settings = &ctx.product.settings;
        let masters = ctx.backends.redlock.len();
        if masters == 0 {
            return Err(BackendError::Unavailable(
                "no redlock masters configured".into(),
            ));
        }
        let key = keys::lock(ctx.product.id);
        let ttl = Duration::from_millis(settings.lease_ms);
        let drift = ttl / 100 + Duration::from_millis(2);
        loop {
            let token = Uuid::new_v4().to_string();
            let started = Instant::now();
            let (key, token_ref) = (&key, &token);
            let took = on_all_masters(ctx, |mut conn| async move {
                try_set(&mut conn, key, token_ref, settings.lease_ms).await
            })
            .await;
            let validity = ttl.checked_sub(started.elapsed() + drift);
            if took >= needed(settings.quorum, masters) && validity.is_some() {
                return Ok(Some(Token(token)));
            }
            // Not held: undo the partial acquisition everywhere.
            release_everywhere(ctx, key, &token).await;
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let jitter = Duration::from_millis(rand::rng().random_range(1..=20));
            tokio::time::sleep(jitter.min(deadline - now)).await;
        }
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: Token) -> Result<(), BackendError> {
        release_everywhere(ctx, &keys::lock(ctx.product.id), &guard.0).await;
        Ok(())
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            redlock: vec![keys::lock(product.id)],
            ..Footprint::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_sizes() {
        assert_eq!(needed(Quorum::Majority, 3), 2);
        assert_eq!(needed(Quorum::Majority, 5), 3);
        assert_eq!(needed(Quorum::Majority, 1), 1);
        assert_eq!(needed(Quorum::All, 3), 3);
    }
}
