//! Idempotent buys: a retry carrying the same `Idempotency-Key` gets the
//! original order back (same order id, 200) instead of buying again.
//!
//! A key is scoped to one product, one reset and one buyer
//! (`seckill:{s<shard>}:{id}:idem:{epoch}:{buyer}:{key}`). The first request claims it
//! with `SET NX` as *pending*; when it sells, the key holds the answer for
//! `idempotency_ttl_secs`; when it does not sell (sold out, busy, limit,
//! failure) the claim is withdrawn, so a retry really tries again. A
//! request that finds the key pending waits for the owner's answer, so a
//! double click gets the same order twice rather than two orders.
//!
//! Only sales are replayed: replaying a `busy` would turn a transient
//! refusal into a permanent one.
//!
//! At most once, even across crashes: the pending claim names the order
//! it is selling (`pending:<order id>:<ms>`) and lives as long as the
//! answer would. When a sale's outcome is unknown (the instance died, or a
//! backend stopped answering after the sale was sent), the claim stays
//! pending; a retry with the key then looks for that order wherever the
//! product's store puts its orders ([`crate::model::seam::Store::find_order`]:
//! PostgreSQL or still in the order stream, MySQL for a product stored
//! there). Found: the original answer, 200.
//! Not found once the claim is [`SETTLE`] old: the first attempt did not
//! sell, and the retry takes the claim over and buys. Before that, or
//! when the ledger cannot be read: `busy`, retry later — never a second
//! sale for one key.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use redis::Script;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::backends::Backends;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::lease::release_key;
use crate::model::error::Invalid;
use crate::model::order::Order;
use crate::model::order::state::Status;
use crate::model::product::{Product, hold_terms, keys, truncate};
use crate::model::seam::Store;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The response header set on a replayed answer.
pub const REPLAYED: &str = "idempotent-replayed";
/// Longest key accepted (a UUID is 36; room for client prefixes).
const MAX_KEY_LEN: usize = 128;
/// How often a request waiting for a pending key looks again.
const POLL: Duration = Duration::from_millis(10);
/// How old a pending claim must be before a retry that does not find its
/// order may conclude it never sold: longer than any sale takes, and than
/// the order writer needs to move an order from the stream into
/// PostgreSQL.
pub const SETTLE: Duration = Duration::from_secs(10);

/// KEYS: the idempotency key. ARGV: the pending value seen, the new one,
/// ttl in ms. Replaces a stale claim only if nobody else did first.
static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) return 1 end \
         return 0",
    )
});

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
    /// buyer's unit number, in effect (no two sales may share one). None
    /// with waves: the counter holds only the waves released so far.
    pub stock_left: Option<i64>,
    /// `sold`, or `held` for a product with `pay_within_ms`: the unit is
    /// the buyer's only once paid (`POST /orders/{id}/pay`) by `pay_by_ms`.
    #[serde(default = "sold")]
    pub status: Status,
    /// With `held`: the first millisecond (since the Unix epoch) the hold
    /// is overdue and its unit goes back on sale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay_by_ms: Option<u64>,
}

/// An answer kept before holds existed was a sale.
fn sold() -> Status {
    Status::Sold
}

impl Sold {
    /// The answer for `order` of `product`: a hold with its due time when
    /// the product takes payment.
    pub fn of(product: &Product, order: Order, stock_left: Option<i64>) -> Self {
        let pay_by_ms = match product.settings.pay_within_ms {
            0 => None,
            within => hold_terms::pay_by_ms(order.order_id, within),
        };
        Self {
            order_id: order.order_id,
            product_id: order.product_id,
            strategy: order.strategy,
            served_by: order.served_by,
            stock_left,
            status: if pay_by_ms.is_some() {
                Status::Held
            } else {
                Status::Sold
            },
            pay_by_ms,
        }
    }
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

/// A keyed buy: whose key it is, and where its order would be.
pub struct Keyed<'a> {
    /// Connections, for the store to look for an order.
    pub backends: &'a Backends,
    /// The product's store: where a sale's order is.
    pub store: &'a dyn Store,
    /// The product, as of the buy's reset.
    pub product: &'a Product,
    /// The buyer.
    pub buyer: &'a str,
    /// The request's `Idempotency-Key`.
    pub key: &'a str,
}

/// Claims `key` for this request, which will record `order_id` if it
/// sells, or waits (up to what the product's settings allow a buy to
/// take) for the request that holds it, then looks for that request's
/// order.
pub async fn claim(
    conn: &mut RedisConn,
    keyed: &Keyed<'_>,
    order_id: Uuid,
    ttl: Duration,
) -> Result<Claimed, BackendError> {
    let product = keyed.product;
    let redis_key = keys::idempotency(product.id, product.epoch, keyed.buyer, keyed.key);
    let pending = pending_value(order_id, keyed.backends.clock.now_ms());
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
        if let Some(sold) = done(&redis_key, &found)? {
            return Ok(Claimed::Replay(sold));
        }
        if Instant::now() >= deadline {
            return settle(conn, keyed, &redis_key, &found, &pending, ttl).await;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// What an earlier request with the key left, read without claiming it:
/// its answer, or — while its claim is pending — its order if that sold,
/// else `InProgress`; `None` when no request holds the key. For a request
/// refused before it would claim (the window closed, its hidden path
/// expired, the product sold out): a retry is answered its order whenever
/// one exists, and is never a second sale.
pub async fn answer(
    conn: &mut RedisConn,
    keyed: &Keyed<'_>,
) -> Result<Option<Claimed>, BackendError> {
    let product = keyed.product;
    let redis_key = keys::idempotency(product.id, product.epoch, keyed.buyer, keyed.key);
    let found: Option<String> = redis::cmd("GET").arg(&redis_key).query_async(conn).await?;
    let Some(found) = found else {
        return Ok(None);
    };
    if let Some(sold) = done(&redis_key, &found)? {
        return Ok(Some(Claimed::Replay(sold)));
    }
    let Some((order_id, _)) = pending_claim(&found) else {
        return Ok(Some(Claimed::InProgress));
    };
    Ok(Some(match claimed_sale(conn, keyed, order_id).await? {
        Some(sold) => Claimed::Replay(sold),
        None => Claimed::InProgress,
    }))
}

/// The answer of a pending claim's sale, if its order is recorded
/// wherever the product's store puts orders (without the stock left,
/// which only the sale knew).
async fn claimed_sale(
    conn: &mut RedisConn,
    keyed: &Keyed<'_>,
    order_id: Uuid,
) -> Result<Option<Sold>, BackendError> {
    let order = keyed
        .store
        .find_order(keyed.backends, conn, keyed.product, order_id)
        .await?;
    Ok(order.map(|order| Sold::of(keyed.product, order, None)))
}

/// The answer `found` at `redis_key` keeps, if its sale is done.
fn done(redis_key: &str, found: &str) -> Result<Option<Sold>, BackendError> {
    let Some(answer) = found.strip_prefix("done:") else {
        return Ok(None);
    };
    serde_json::from_str(answer)
        .map(Some)
        .map_err(|e| BackendError::Corrupt(format!("idempotency answer {redis_key}: {e}")))
}

/// `pending:<order id>:<ms>`, the claim's order id and when it was made,
/// on the shared clock (`Backends::clock`): every instance judges a
/// claim's age by the same clock, so an instance whose own clock runs
/// ahead cannot take over a claim whose seller is merely slow.
fn pending_value(order_id: Uuid, now_ms: u64) -> String {
    format!("pending:{order_id}:{now_ms}")
}

/// The order id and time of a pending claim's value.
fn pending_claim(found: &str) -> Option<(Uuid, u64)> {
    let mut parts = found.strip_prefix("pending:")?.split(':');
    let order_id = parts.next()?.parse().ok()?;
    let since_ms = parts.next()?.parse().ok()?;
    Some((order_id, since_ms))
}

/// A claim that stayed pending past the wait: its sale's outcome is
/// unknown to everyone but the ledger. The order found: the sale's answer
/// (without the stock left, which only the sale knew). Not found and the
/// claim settled: taken over by this request.
async fn settle(
    conn: &mut RedisConn,
    keyed: &Keyed<'_>,
    redis_key: &str,
    found: &str,
    pending: &str,
    ttl: Duration,
) -> Result<Claimed, BackendError> {
    let Some((order_id, since_ms)) = pending_claim(found) else {
        return Ok(Claimed::InProgress);
    };
    if let Some(sold) = claimed_sale(conn, keyed, order_id).await? {
        return Ok(Claimed::Replay(sold));
    }
    let now_ms = keyed.backends.clock.now_ms();
    if now_ms.saturating_sub(since_ms) < SETTLE.as_millis() as u64 {
        return Ok(Claimed::InProgress);
    }
    let taken: i64 = TAKE_OVER
        .key(redis_key)
        .arg(found)
        .arg(pending)
        .arg(ttl.as_millis() as u64)
        .invoke_async(conn)
        .await?;
    if taken == 1 {
        tracing::info!(%order_id, "an unknown outcome did not sell; the retry buys");
        return Ok(Claimed::Owner(Claim {
            key: redis_key.to_owned(),
            pending: pending.to_owned(),
            ttl,
        }));
    }
    Ok(Claimed::InProgress)
}

impl Claim {
    /// Keeps the sale's answer for replays.
    pub async fn record(&self, conn: &mut RedisConn, sold: &Sold) -> Result<(), BackendError> {
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
    pub async fn withdraw(&self, conn: &mut RedisConn) -> Result<(), BackendError> {
        release_key(conn, &self.key, &self.pending).await
    }
}
