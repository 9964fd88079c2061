//! The local sold-out flag: once an instance has seen a product sell out it
//! answers 409 `sold_out` from memory, without touching Redis or
//! PostgreSQL — after a flash sale ends, almost all traffic is exactly
//! that.
//!
//! A reset must clear the flag on every instance *before* anyone can buy
//! the new stock, or a restocked product would still be refused. The reset
//! publishes `id:token` on [`RESETS`]; every instance clears its flag and
//! acknowledges on `seckill:reset-ack:{token}`; the reset waits for as many
//! acknowledgements as Redis counted receivers. A flag also expires by
//! itself after [`FLAG_TTL`], so a message lost to a broken subscription
//! costs at most that long.
//!
//! The same message makes every instance forget its copy of the product
//! ([`ProductCache`]): an instance's [`Memory`] is forgotten as one.

use crate::sale::live::{Answer, LiveStats};
use crate::sale::waves::Released;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redis::AsyncCommands;
use uuid::Uuid;

use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::master::MainRedis;
use crate::sale::product_store::ProductCache;

/// The channel resets are announced on.
pub const RESETS: &str = "seckill:resets";
/// How long a flag is believed without a fresh sold-out answer.
pub const FLAG_TTL: Duration = Duration::from_secs(5);
/// How long a reset waits for the instances' acknowledgements.
const ACK_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest single wait for one acknowledgement, in seconds: under the
/// Redis connection's 500 ms response timeout.
const ACK_BLOCK_SECS: f64 = 0.2;

/// What an instance remembers about products between requests, and
/// forgets as one when a product is reset.
#[derive(Default)]
pub struct Memory {
    /// Products seen sold out.
    pub sold_out: SoldOutFlags,
    /// Copies of the products.
    pub products: ProductCache,
    /// How many waves of each product this instance knows are on sale.
    pub waves: Released,
    /// What the last minute answered, per product (the live view).
    pub live: Arc<LiveStats>,
}

impl Memory {
    /// Counts what a buyer of product `id` was told, for the live view: the
    /// one place both feed it (the buy's answer, and the buyer limiter's
    /// 429 before the buy runs), on this instance's clock second. Only a
    /// product this instance knows may count, so that made-up ids cannot
    /// grow the view: a buy's answer has a kind only then, and the
    /// limiter asks [`Memory::knows`] first.
    pub fn tell_live(&self, id: i64, answer: Answer, took: Duration) {
        let now_s = crate::model::product::now_ms() / 1000;
        self.live.record(id, answer, took, now_s);
    }

    /// Whether this instance holds a copy of product `id` now.
    pub fn knows(&self, id: i64) -> bool {
        self.products.get(id).is_ok()
    }

    /// Forgets product `id` (it was reset).
    pub fn forget(&self, id: i64) {
        self.sold_out.clear(id);
        self.products.forget(id);
        self.waves.forget(id);
        self.live.forget(id);
    }

    /// Forgets every product (the subscription was lost: resets may have
    /// been missed).
    pub fn forget_all(&self) {
        self.sold_out.clear_all();
        self.products.forget_all();
        self.live.forget_all();
    }
}

/// Products this instance knows to be sold out: when it learned it, and
/// of which reset (a sale of the old stock that ends after a reset must
/// not flag the new).
#[derive(Default)]
pub struct SoldOutFlags {
    /// A std mutex: held for one map operation, never across an await.
    flags: Mutex<HashMap<i64, (Instant, i64)>>,
    /// Bumped by every clear: a sale that saw the stock empty before
    /// units went back (a restock, a give-back) must not flag the product
    /// after the clear that announced them.
    clears: AtomicU64,
}

impl SoldOutFlags {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Instant, i64)>> {
        self.flags.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether reset `epoch` of the product is known sold out (and the
    /// knowledge is fresh).
    pub fn is_sold_out(&self, id: i64, epoch: i64) -> bool {
        self.map()
            .get(&id)
            .is_some_and(|(since, flagged)| *flagged == epoch && since.elapsed() < FLAG_TTL)
    }

    /// The clears so far: read before asking the store, handed to
    /// [`SoldOutFlags::mark`].
    pub fn seen(&self) -> u64 {
        self.clears.load(Ordering::Acquire)
    }

    /// Remembers that reset `epoch` of the product sold out, unless a
    /// flag was cleared since `seen` (units may have gone back since the
    /// store said so).
    pub fn mark(&self, id: i64, epoch: i64, seen: u64) {
        let mut map = self.map();
        if self.clears.load(Ordering::Acquire) == seen {
            map.insert(id, (Instant::now(), epoch));
        }
    }

    /// Forgets the product's flag (it was reset, or units went back).
    pub fn clear(&self, id: i64) {
        let mut map = self.map();
        self.clears.fetch_add(1, Ordering::AcqRel);
        map.remove(&id);
    }

    /// Forgets every flag.
    pub fn clear_all(&self) {
        let mut map = self.map();
        self.clears.fetch_add(1, Ordering::AcqRel);
        map.clear();
    }
}

/// Listens for resets until `shutdown` turns true, clearing flags and
/// acknowledging; reconnects after a lost subscription.
pub async fn listen(
    client: MainRedis,
    memory: Arc<Memory>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    while !*shutdown.borrow() {
        tokio::select! {
            result = listen_once(&client, &memory) => {
                if let Err(error) = result {
                    tracing::warn!(%error, "reset listener lost its subscription; reconnecting");
                }
            }
            _ = shutdown.changed() => return,
        }
        memory.forget_all();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn listen_once(client: &MainRedis, memory: &Memory) -> Result<(), BackendError> {
    let mut acks = client.get_multiplexed_async_connection().await?;
    let mut pubsub = client.get_async_pubsub().await?;
    pubsub.subscribe(RESETS).await?;
    // Anything remembered before this subscription may have missed a reset.
    memory.forget_all();
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        let Ok(payload) = message.get_payload::<String>() else {
            continue;
        };
        let Some((id, token)) = payload.split_once(':') else {
            continue;
        };
        let Ok(id) = id.parse::<i64>() else {
            continue;
        };
        // `restocked-{token}`: units went back on sale, so only the
        // flag goes; `moved-{token}`: its settings changed (the window),
        // so only the copy goes; a bare token: a reset, so everything of
        // it goes.
        let token = if let Some(token) = token.strip_prefix(RESTOCKED) {
            memory.sold_out.clear(id);
            token
        } else if let Some(token) = token.strip_prefix(MOVED) {
            memory.products.forget(id);
            token
        } else {
            memory.forget(id);
            token
        };
        let key = ack_key(token);
        redis::pipe()
            .rpush(&key, 1)
            .ignore()
            .expire(&key, 10)
            .ignore()
            .query_async::<()>(&mut acks)
            .await?;
    }
    Ok(())
}

/// The prefix of a restock message's token: units went back on sale, so
/// the product's sold-out flags go (nothing else is forgotten).
const RESTOCKED: &str = "restocked-";

/// The prefix of a settings change's token: the product's copies go
/// (its flags and waves stay).
const MOVED: &str = "moved-";

/// Tells every instance that units of `id` went back on sale and waits
/// until each one that received the message has cleared its sold-out
/// flag (a give-back, an addition). Returns how many did.
pub async fn broadcast_restock(conn: &mut RedisConn, id: i64) -> Result<usize, BackendError> {
    let token = format!("{RESTOCKED}{}", Uuid::new_v4().simple());
    Ok(broadcast(conn, id, &token, "restock").await?.acked)
}

/// Tells every instance that the settings of `id` changed (its window
/// moved) and waits until each one that received the message has
/// forgotten its copy of the product.
pub async fn broadcast_moved(conn: &mut RedisConn, id: i64) -> Result<Told, BackendError> {
    let token = format!("{MOVED}{}", Uuid::new_v4().simple());
    broadcast(conn, id, &token, "window").await
}

/// How many instances heard a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    /// Subscribers Redis delivered the message to.
    pub receivers: usize,
    /// Those that acknowledged in time.
    pub acked: usize,
}

fn ack_key(token: &str) -> String {
    format!("seckill:reset-ack:{token}")
}

/// Tells every instance that `id` was reset and waits until each one that
/// received the message has cleared its flag. Returns how many did.
pub async fn broadcast_reset(conn: &mut RedisConn, id: i64) -> Result<usize, BackendError> {
    let token = Uuid::new_v4().simple().to_string();
    Ok(broadcast(conn, id, &token, "reset").await?.acked)
}

/// Publishes `id:token` and waits for the receivers' acknowledgements.
async fn broadcast(
    conn: &mut RedisConn,
    id: i64,
    token: &str,
    what: &str,
) -> Result<Told, BackendError> {
    let receivers: usize = conn.publish(RESETS, format!("{id}:{token}")).await?;
    let bare = [RESTOCKED, MOVED]
        .iter()
        .find_map(|prefix| token.strip_prefix(prefix));
    let key = ack_key(bare.unwrap_or(token));
    let started = Instant::now();
    let mut acked = 0;
    // Each acknowledgement is one element: BLPOP returns as soon as one
    // arrives. Short blocks keep each call within the connection's
    // response timeout.
    while acked < receivers && started.elapsed() < ACK_TIMEOUT {
        let popped: Option<(String, i64)> = conn.blpop(&key, ACK_BLOCK_SECS).await?;
        acked += usize::from(popped.is_some());
    }
    let _: i64 = conn.del(&key).await?;
    if acked < receivers {
        tracing::warn!(
            product = id,
            receivers,
            acked,
            what,
            "not every instance acknowledged"
        );
    }
    Ok(Told { receivers, acked })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_mark_clear_and_forget() {
        let flags = SoldOutFlags::default();
        assert!(!flags.is_sold_out(1, 1));
        flags.mark(1, 1, flags.seen());
        flags.mark(2, 1, flags.seen());
        assert!(flags.is_sold_out(1, 1));
        assert!(!flags.is_sold_out(1, 2), "a flag of the old stock");
        flags.clear(1);
        assert!(!flags.is_sold_out(1, 1));
        assert!(flags.is_sold_out(2, 1));
        let before = flags.seen();
        flags.clear(3);
        flags.mark(3, 1, before);
        assert!(!flags.is_sold_out(3, 1), "a sell-out seen before a clear");
        flags.clear_all();
        assert!(!flags.is_sold_out(2, 1));
    }
}
