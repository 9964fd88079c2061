//! `redisson`: Redisson's `RLock` — a reentrant hash lock (owner token →
//! hold count) taken and released by Lua scripts, a watchdog that renews
//! the lease every `lease_ms / 3` while the lock is held, and waiters woken
//! by a Pub/Sub message on release instead of spinning.
//!
//! Reentrancy is keyed by an owner token the caller carries (one per buy
//! here), never by thread id: async tasks hop threads.
//!
//! Known failure: a frozen process. The watchdog lives in the holder's
//! process; when the process is paused (GC, SIGSTOP) the watchdog pauses
//! too, the lease runs out, the next waiter takes the lock, and the frozen
//! holder wakes up inside its critical section and writes — oversell.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use redis::Script;
use redis::aio::MultiplexedConnection;
use tokio::sync::{Notify, OnceCell};
use uuid::Uuid;

use super::{Guard, Lock};
use crate::error::BackendError;
use crate::product::keys;
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `redisson` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "redisson",
            backend: "redis",
            store: StoreKind::Redis,
            mechanism: "reentrant hash lock (owner -> count) in Lua, watchdog renewing every lease/3, waiters woken by Pub/Sub",
            safe: true,
            safe_against: "work longer than the lease (the watchdog renews it); a crashed holder (the lease runs out)",
            unsafe_against: "a frozen process: its watchdog freezes too and the lease expires under it",
        },
        Redisson::default(),
    )
}

/// KEYS: lock. ARGV: lease ms, owner. Nil when acquired (or re-entered),
/// else the lock's remaining TTL in ms.
static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then \
           redis.call('hincrby', KEYS[1], ARGV[2], 1) \
           redis.call('pexpire', KEYS[1], ARGV[1]) \
           return nil \
         end \
         return redis.call('pttl', KEYS[1])",
    )
});

/// KEYS: lock, unlock channel. ARGV: message, lease ms, owner. Nil when
/// not the owner, 0 when still held (re-entered), 1 when released.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end \
         local count = redis.call('hincrby', KEYS[1], ARGV[3], -1) \
         if count > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) return 0 end \
         redis.call('del', KEYS[1]) \
         redis.call('publish', KEYS[2], ARGV[1]) \
         return 1",
    )
});

/// KEYS: lock. ARGV: lease ms, owner. 1 when renewed, 0 when no longer ours.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then \
           redis.call('pexpire', KEYS[1], ARGV[1]) return 1 end \
         return 0",
    )
});

/// One attempt (or re-entry) by `owner`: `None` when held now, else the
/// current holder's remaining TTL.
pub async fn try_lock(
    conn: &mut MultiplexedConnection,
    product_id: i64,
    owner: &str,
    lease_ms: u64,
) -> Result<Option<i64>, BackendError> {
    Ok(ACQUIRE
        .key(keys::lock(product_id))
        .arg(lease_ms)
        .arg(owner)
        .invoke_async(conn)
        .await?)
}

/// One release by `owner`: `None` when it did not hold the lock,
/// `Some(false)` when still held (re-entered), `Some(true)` when released.
pub async fn unlock(
    conn: &mut MultiplexedConnection,
    product_id: i64,
    owner: &str,
    lease_ms: u64,
) -> Result<Option<bool>, BackendError> {
    let released: Option<i64> = RELEASE
        .key(keys::lock(product_id))
        .key(keys::unlock_channel(product_id))
        .arg(product_id)
        .arg(lease_ms)
        .arg(owner)
        .invoke_async(conn)
        .await?;
    Ok(released.map(|r| r == 1))
}

/// The Redisson-style lock: one Pub/Sub listener per instance wakes this
/// instance's waiters for a product when its lock is released.
#[derive(Default)]
pub struct Redisson {
    /// Waiters per product on this instance. A std mutex: held only to look
    /// up an entry, never across an await.
    waiters: Arc<Mutex<HashMap<i64, Arc<Notify>>>>,
    /// Started on first use; lives as long as the instance.
    listener: OnceCell<()>,
}

impl Redisson {
    fn notify(&self, product_id: i64) -> Arc<Notify> {
        notify_for(&self.waiters, product_id)
    }

    /// Subscribes to every product's unlock channel once per instance.
    async fn listen(&self, client: &redis::Client) -> Result<(), BackendError> {
        self.listener
            .get_or_try_init(|| async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.psubscribe("seckill:*:unlock").await?;
                let waiters = self.waiters.clone();
                tokio::spawn(async move {
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        if let Ok(id) = message.get_payload::<i64>() {
                            notify_for(&waiters, id).notify_waiters();
                        }
                    }
                    tracing::warn!(
                        "redisson unlock listener ended; waiters fall back to TTL polling"
                    );
                });
                Ok::<(), BackendError>(())
            })
            .await?;
        Ok(())
    }
}

fn notify_for(waiters: &Mutex<HashMap<i64, Arc<Notify>>>, product_id: i64) -> Arc<Notify> {
    let mut map = waiters.lock().unwrap_or_else(|p| p.into_inner());
    map.entry(product_id).or_default().clone()
}

/// Renews the lease every third of it while the lock is held; aborted on
/// release (and frozen with its process, which is the point).
struct Watchdog(tokio::task::JoinHandle<()>);

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn start_watchdog(
    mut conn: MultiplexedConnection,
    product_id: i64,
    owner: String,
    lease_ms: u64,
) -> Watchdog {
    Watchdog(tokio::spawn(async move {
        let period = Duration::from_millis((lease_ms / 3).max(1));
        loop {
            tokio::time::sleep(period).await;
            let renewed: Result<i64, _> = RENEW
                .key(keys::lock(product_id))
                .arg(lease_ms)
                .arg(&owner)
                .invoke_async(&mut conn)
                .await;
            if !matches!(renewed, Ok(1)) {
                return;
            }
        }
    }))
}

impl Lock for Redisson {
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
            self.listen(&ctx.backends.redis_client).await?;
            let id = ctx.product.id;
            let lease = ctx.product.settings.lease_ms;
            let owner = format!("{}:{}", ctx.order.served_by, Uuid::new_v4().simple());
            let notify = self.notify(id);
            let mut conn = ctx.redis.clone();
            loop {
                // Register for the wake-up before trying, so a release
                // between the attempt and the wait is not missed.
                let woken = notify.notified();
                tokio::pin!(woken);
                woken.as_mut().enable();
                let Some(ttl) = try_lock(&mut conn, id, &owner, lease).await? else {
                    let watchdog = start_watchdog(conn, id, owner.clone(), lease);
                    return Ok(Some(Guard::with_token(owner).holding(watchdog)));
                };
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                let wait = Duration::from_millis(ttl.max(1) as u64).min(deadline - now);
                let _ = tokio::time::timeout(wait, woken).await;
            }
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        mut guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            drop(guard.take_held::<Watchdog>());
            let lease = ctx.product.settings.lease_ms;
            unlock(&mut ctx.redis.clone(), ctx.product.id, &guard.token, lease).await?;
            Ok(())
        }
        .boxed()
    }
}
