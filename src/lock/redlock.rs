//! `redlock`: Redis's RedLock — the same `SET NX PX` on N independent
//! masters; the lock is held when a quorum took it within its validity time
//! `TTL − elapsed − drift` (drift = 1 % of the TTL + 2 ms); otherwise every
//! master is released and the attempt retried after a random delay.
//! `quorum: "all"` turns it into the articles' MultiLock.
//!
//! Written here rather than with the `rslock` crate: the MultiLock variant
//! needs a quorum of all, and the masters' connections come from the same
//! deadpool pools as everything else, each call bounded by a short timeout
//! so a dead master costs milliseconds, not a connect timeout.
//!
//! Known failure: safe with a minority of masters down. Like every lease
//! it is unsafe when the holder outlives the validity time (Kleppmann's
//! critique); with all masters required, one master down means no lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::future::{BoxFuture, join_all};
use rand::Rng;
use redis::aio::MultiplexedConnection;
use uuid::Uuid;

use super::redis_lock::{release_key, try_set};
use super::{Guard, Lock};
use crate::error::BackendError;
use crate::product::{Quorum, keys};
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `redlock` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "redlock",
            backend: "redis x N",
            store: StoreKind::Redis,
            mechanism: "SET NX PX on N independent masters; held with a majority within TTL - elapsed - drift (quorum \"all\": MultiLock)",
            safe: true,
            safe_against: "a minority of masters down (majority quorum); many instances",
            unsafe_against: "a holder outliving the validity time; with quorum \"all\", any master down stops all sales",
        },
        RedLock,
    )
}

/// How long one master may take to answer before it counts as a failure:
/// small against the TTL, as the algorithm asks, so a dead master costs
/// milliseconds.
const PER_MASTER: Duration = Duration::from_millis(100);

/// One independent master: a shared multiplexed connection, opened on
/// first use and reopened after a failure. No pool checkout (and its ping)
/// per command: an acquisition is one round trip per master.
pub struct Master {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// After a failure the master is skipped for [`REST`], so waiters do not
    /// queue behind reconnects to a master that is down. A std mutex: held
    /// for a read or a write of an instant, never across an await.
    down_until: std::sync::Mutex<Option<Instant>>,
}

/// How long a failed master is skipped before it is tried again.
const REST: Duration = Duration::from_millis(250);

impl Master {
    /// A master at `url` (not connected yet).
    pub fn new(url: &str) -> Result<Self, BackendError> {
        Ok(Self {
            client: redis::Client::open(url)?,
            conn: tokio::sync::Mutex::new(None),
            down_until: std::sync::Mutex::new(None),
        })
    }

    /// Deletes `key` on this master (a reset clearing the product's lock).
    pub async fn del(&self, key: &str) -> Result<(), BackendError> {
        self.run(|mut conn| async move {
            let _: i64 = redis::AsyncCommands::del(&mut conn, key).await?;
            Ok(())
        })
        .await
    }

    /// Runs `op` on this master's connection; a failure drops the
    /// connection so the next call reconnects.
    async fn run<T, F, Fut>(&self, op: F) -> Result<T, BackendError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, BackendError>>,
    {
        let resting = {
            let down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
            down.is_some_and(|until| Instant::now() < until)
        };
        if resting {
            return Err(BackendError::Unavailable(
                "redlock master recently failed".into(),
            ));
        }
        let result = self.run_connected(op).await;
        if result.is_err() {
            *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Instant::now() + REST);
        }
        result
    }

    async fn run_connected<T, F, Fut>(&self, op: F) -> Result<T, BackendError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, BackendError>>,
    {
        let conn = {
            let mut slot = self.conn.lock().await;
            match &*slot {
                Some(conn) => conn.clone(),
                None => {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(PER_MASTER))
                        .set_response_timeout(Some(PER_MASTER));
                    let conn = tokio::time::timeout(
                        PER_MASTER,
                        self.client
                            .get_multiplexed_async_connection_with_config(&config),
                    )
                    .await
                    .map_err(|_| {
                        BackendError::Unavailable("redlock master connect timed out".into())
                    })??;
                    *slot = Some(conn.clone());
                    conn
                }
            }
        };
        let result = op(conn).await;
        if result.is_err() {
            *self.conn.lock().await = None;
        }
        result
    }
}

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
async fn on_all_masters<'a, F, Fut>(ctx: &'a BuyCtx<'a>, op: F) -> usize
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
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
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
                    return Ok(Some(Guard::with_token(token)));
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
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            release_everywhere(ctx, &keys::lock(ctx.product.id), &guard.token).await;
            Ok(())
        }
        .boxed()
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
