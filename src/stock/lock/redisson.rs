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

use futures::StreamExt;
use redis::Script;
use redis::aio::ConnectionLike;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{Acquired, Lock};
use crate::backends::Footprint;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::master::MainRedis;
use crate::model::product::{Product, keys};
use crate::model::seam::BuyCtx;

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
    conn: &mut (impl ConnectionLike + Send),
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
    conn: &mut (impl ConnectionLike + Send),
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
    /// The listener task, started on first use and aborted when the lock
    /// (the instance's catalogue) is dropped at shutdown.
    listener: std::sync::OnceLock<Task>,
}

/// A task that ends with its owner.
struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long the listener waits before subscribing again after losing its
/// subscription (Redis restarted, connection cut).
const RESUBSCRIBE_AFTER: Duration = Duration::from_millis(200);

impl Redisson {
    fn notify(&self, product_id: i64) -> Arc<Notify> {
        notify_for(&self.waiters, product_id)
    }

    /// Starts the instance's listener on first use.
    fn listen(&self, client: &MainRedis) {
        self.listener.get_or_init(|| {
            let (client, waiters) = (client.clone(), self.waiters.clone());
            Task(tokio::spawn(listen_forever(client, waiters)))
        });
    }
}

/// Subscribes to every product's unlock channel and wakes the product's
/// waiters on each message; subscribes again whenever the subscription is
/// lost. Meanwhile waiters still wake up when the holder's TTL runs out,
/// and every waiter is woken on a loss, since a release may have been
/// missed.
async fn listen_forever(client: MainRedis, waiters: Arc<Mutex<HashMap<i64, Arc<Notify>>>>) {
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => {
                if pubsub.psubscribe("seckill:*:unlock").await.is_ok() {
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        if let Ok(id) = message.get_payload::<i64>() {
                            notify_for(&waiters, id).notify_waiters();
                        }
                    }
                }
                tracing::warn!("redisson unlock listener lost its subscription; resubscribing");
            }
            Err(error) => tracing::warn!(%error, "redisson unlock listener cannot subscribe"),
        }
        let all: Vec<Arc<Notify>> = {
            let map = waiters.lock().unwrap_or_else(|p| p.into_inner());
            map.values().cloned().collect()
        };
        all.iter().for_each(|n| n.notify_waiters());
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
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

fn start_watchdog(mut conn: RedisConn, product_id: i64, owner: String, lease_ms: u64) -> Watchdog {
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

/// A held `redisson` lock: its owner token and the watchdog renewing it.
pub struct RedissonGuard {
    owner: String,
    watchdog: Watchdog,
}

impl Lock for Redisson {
    type Guard = RedissonGuard;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<RedissonGuard> {
        self.listen(&ctx.backends.redis_client);
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
                return Ok(Some(RedissonGuard { owner, watchdog }));
            };
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wait = Duration::from_millis(ttl.max(1) as u64).min(deadline - now);
            let _ = tokio::time::timeout(wait, woken).await;
        }
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: RedissonGuard) -> Result<(), BackendError> {
        let RedissonGuard { owner, watchdog } = guard;
        // The watchdog stops before the unlock, so it cannot renew a lock
        // that is no longer ours.
        drop(watchdog);
        let lease = ctx.product.settings.lease_ms;
        unlock(&mut ctx.redis.clone(), ctx.product.id, &owner, lease).await?;
        Ok(())
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint::redis([keys::lock(product.id)])
    }
}
