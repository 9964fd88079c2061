//! Idempotent buys: a retry carrying the same `Idempotency-Key` gets the
//! original order back (same order id, 200) instead of buying again.
//!
//! A key is scoped to one product, one reset and one buyer
//! (`seckill:{id}:idem:{epoch}:{buyer}:{key}`). The first request claims it
//! with `SET NX` as *pending*; when it sells, the key holds the answer for
//! `idempotency_ttl_secs`; when it does not sell (sold out, busy, limit,
//! failure) the claim is withdrawn, so a retry really tries again. A
//! request that finds the key pending waits for the owner's answer, so a
//! double click gets the same order twice rather than two orders.
//!
//! Only sales are replayed: replaying a `busy` would turn a transient
//! refusal into a permanent one.
//!
//! At most once, even across crashes: the pending claim lives as long as
//! the answer would. An instance that dies between claim and answer leaves
//! the key pending until it expires, and retries with it are answered
//! `busy`; the key never buys a second time.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use redis::Script;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::backends::lease::release_key;
use crate::error::{BackendError, Invalid};
use crate::product::{Product, keys, truncate};

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The response header set on a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";
/// Longest key accepted (a UUID is 36; room for client prefixes).
const MAX_KEY_LEN: usize = 128;
/// How often a request waiting for a pending key looks again.
const POLL: Duration = Duration::from_millis(10);

/// KEYS: the idempotency key. ARGV: pending value, ttl in ms.
/// Claims the key and returns '' or, when it is taken, its value; in one
/// round trip, so there is no gap between the failed claim and the read.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end \
         return redis.call('GET', KEYS[1])",
    )
});

/// The answer to a sale, as sent and as kept for replays.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Sold {
    /// The order's id.
    pub order_id: Uuid,
    /// The product sold.
    pub product_id: i64,
    /// The strategy that sold it.
    pub strategy: String,
    /// The instance that sold it.
    pub served_by: String,
    /// The stock right after this sale, where the strategy knows it: the
    /// buyer's unit number, in effect (no two sales may share one).
    pub stock_left: Option<i64>,
}

/// The request's `Idempotency-Key`, if any: 1 to 128 visible ASCII
/// characters.
pub fn parse(headers: &HeaderMap) -> Result<Option<String>, Invalid> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    let key = value.to_str().unwrap_or_default();
    let visible = |c: char| c.is_ascii_graphic();
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.chars().all(visible) {
        return Err(Invalid(format!(
            "Idempotency-Key must be 1 to {MAX_KEY_LEN} visible ASCII characters, got {:?}",
            truncate(&String::from_utf8_lossy(value.as_bytes()), 40)
        )));
    }
    Ok(Some(key.to_owned()))
}

/// A claimed key: the request that holds it sells and then records the
/// answer or withdraws the claim.
#[derive(Debug, Clone)]
pub struct Claim {
    key: String,
    pending: String,
    ttl: Duration,
}

/// What claiming found.
pub enum Claimed {
    /// This request owns the key: go on and sell.
    Owner(Claim),
    /// An earlier request with this key sold: its answer.
    Replay(Sold),
    /// The request holding the key did not answer within the wait: the
    /// client should retry later (with the same key).
    InProgress,
}

/// Claims `key` for this request, or waits (up to what the product's
/// settings allow a buy to take) for the request that holds it.
pub async fn claim(
    conn: &mut MultiplexedConnection,
    product: &Product,
    buyer: &str,
    key: &str,
    ttl: Duration,
) -> Result<Claimed, BackendError> {
    let redis_key = keys::idempotency(product.id, product.epoch, buyer, key);
    let pending = format!("pending:{}", Uuid::new_v4());
    let settings = &product.settings;
    let patience = Duration::from_millis(settings.acquire_timeout_ms + settings.work_ms + 1_000);
    let deadline = Instant::now() + patience;
    loop {
        let found: String = CLAIM
            .key(&redis_key)
            .arg(&pending)
            .arg(ttl.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        if found.is_empty() {
            return Ok(Claimed::Owner(Claim {
                key: redis_key,
                pending,
                ttl,
            }));
        }
        if let Some(answer) = found.strip_prefix("done:") {
            let sold = serde_json::from_str(answer).map_err(|e| {
                BackendError::Corrupt(format!("idempotency answer {redis_key}: {e}"))
            })?;
            return Ok(Claimed::Replay(sold));
        }
        if Instant::now() >= deadline {
            return Ok(Claimed::InProgress);
        }
        tokio::time::sleep(POLL).await;
    }
}

impl Claim {
    /// Keeps the sale's answer for replays.
    pub async fn record(
        &self,
        conn: &mut MultiplexedConnection,
        sold: &Sold,
    ) -> Result<(), BackendError> {
        let answer = format!(
            "done:{}",
            serde_json::to_string(sold).expect("an answer always serializes")
        );
        redis::cmd("SET")
            .arg(&self.key)
            .arg(answer)
            .arg("PX")
            .arg(self.ttl.as_millis() as u64)
            .query_async::<()>(conn)
            .await?;
        Ok(())
    }

    /// Withdraws the claim after a buy that did not sell, so a retry with
    /// the same key tries again (only if the claim is still ours).
    pub async fn withdraw(&self, conn: &mut MultiplexedConnection) -> Result<(), BackendError> {
        release_key(conn, &self.key, &self.pending).await
    }
}
