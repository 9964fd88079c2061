//! Products: their id, strategy, settings and reset generation, and where
//! each backend keeps them.

use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::store::StoreKind;

/// Largest stock a reset accepts; far above any flash sale, far below
/// anything that could overflow a counter.
pub const MAX_STOCK: i64 = 1_000_000_000;
/// Upper bound of every millisecond knob: a minute is already absurd for
/// simulated work and keeps a typo from parking a request for hours.
pub const MAX_MS: u64 = 60_000;
/// Upper bound of `max_retries`.
pub const MAX_RETRIES: u32 = 10_000;
/// Upper bound of `segments`.
pub const MAX_SEGMENTS: u32 = 64;
/// Upper bound of `per_user_limit`.
pub const MAX_PER_USER: u32 = 1_000_000;

/// A product id from a URL path: 1 ..= i64::MAX (PostgreSQL's BIGINT).
///
/// Parsed by hand rather than by axum's `Path<i64>` so that every malformed
/// id (`0`, `-1`, `2^64`, `abc`) gets the contract's `bad_request` body.
pub fn parse_id(raw: &str) -> Result<i64, ApiError> {
    match raw.parse::<i64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(ApiError::BadRequest(format!(
            "product id must be an integer from 1 to {}, got {:?}",
            i64::MAX,
            truncate(raw, 40)
        ))),
    }
}

/// Shortens text quoted back in an error message.
pub fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Per-product knobs of a strategy, as sent in the reset body.
///
/// Defaults keep the safe strategies fast; the races that demonstrate a
/// failure set `work_ms`/`lease_ms` explicitly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Simulated business work inside the critical section (or the
    /// transaction), in ms: what makes races and lease expiry reproducible.
    pub work_ms: u64,
    /// Lock time-to-live in ms for the lease-based locks.
    pub lease_ms: u64,
    /// How long a buyer waits for a lock before giving up as `busy`.
    pub acquire_timeout_ms: u64,
    /// How often an optimistic update is retried before giving up as `busy`.
    pub max_retries: u32,
    /// Where a locked strategy keeps the stock (default: the strategy's
    /// own backend), so "RedLock guarding a PostgreSQL row" is one reset
    /// away.
    pub store: Option<StoreKind>,
    /// Stock segments of `segmented`.
    pub segments: u32,
    /// How many RedLock masters must agree: a majority, or all of them
    /// (the articles' MultiLock).
    pub quorum: Quorum,
    /// `setnx-naive` only: a pause between its SETNX and its EXPIRE, which
    /// widens the window where a crash leaves a lock that never expires.
    pub crash_gap_ms: u64,
    /// Units one buyer may hold of the product; 0 = unlimited. Enforced in
    /// the same atomic step as the decrement (see [`crate::limit`]).
    pub per_user_limit: u32,
}

/// RedLock's agreement rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Quorum {
    /// More than half of the masters.
    #[default]
    Majority,
    /// Every master (MultiLock): one master down means no lock.
    All,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            work_ms: 0,
            lease_ms: 5_000,
            acquire_timeout_ms: 5_000,
            max_retries: 20,
            store: None,
            segments: 8,
            quorum: Quorum::Majority,
            crash_gap_ms: 0,
            per_user_limit: 0,
        }
    }
}

impl Settings {
    /// Rejects values that are out of range instead of clamping them, so a
    /// caller never races under settings it did not ask for.
    pub fn validate(&self) -> Result<(), ApiError> {
        let check = |name: &str, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                Err(ApiError::BadRequest(format!(
                    "{name} must be between {min} and {max}, got {value}"
                )))
            } else {
                Ok(())
            }
        };
        check("work_ms", self.work_ms, 0, MAX_MS)?;
        check("lease_ms", self.lease_ms, 1, MAX_MS)?;
        check("acquire_timeout_ms", self.acquire_timeout_ms, 0, MAX_MS)?;
        check(
            "max_retries",
            u64::from(self.max_retries),
            0,
            u64::from(MAX_RETRIES),
        )?;
        check(
            "segments",
            u64::from(self.segments),
            1,
            u64::from(MAX_SEGMENTS),
        )?;
        check("crash_gap_ms", self.crash_gap_ms, 0, MAX_MS)?;
        check(
            "per_user_limit",
            u64::from(self.per_user_limit),
            0,
            u64::from(MAX_PER_USER),
        )
    }
}

/// A product as every instance sees it on the buy path (cached in Redis,
/// authoritative in PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// The product id (1 ..= i64::MAX).
    pub id: i64,
    /// The registry id of the strategy that sells it.
    pub strategy: String,
    /// The strategy's knobs.
    pub settings: Settings,
    /// Stock set by the last reset.
    pub initial: i64,
    /// Reset generation: orders carry it, so only this reset's orders count.
    pub epoch: i64,
}

/// Redis key names for one product. The `{id}` hash tag keeps a product's
/// keys in one cluster slot.
pub mod keys {
    /// The Redis strategies' stock counter.
    pub fn stock(id: i64) -> String {
        format!("seckill:{{{id}}}:stock")
    }
    /// The current reset generation, checked by every Redis write so a buy
    /// that started before a reset cannot sell into the new stock.
    pub fn epoch(id: i64) -> String {
        format!("seckill:{{{id}}}:epoch")
    }
    /// The product's JSON, the buy path's cache of the PostgreSQL row.
    pub fn product(id: i64) -> String {
        format!("seckill:{{{id}}}:product")
    }
    /// The lock of the Redis lock strategies.
    pub fn lock(id: i64) -> String {
        format!("seckill:{{{id}}}:lock")
    }
    /// The fencing-token counter of `fenced` (INCR on acquire).
    pub fn fence(id: i64) -> String {
        format!("seckill:{{{id}}}:fence")
    }
    /// The newest fencing token that has touched the stock.
    pub fn fence_seen(id: i64) -> String {
        format!("seckill:{{{id}}}:fence:seen")
    }
    /// The Pub/Sub channel announcing a `redisson` unlock.
    pub fn unlock_channel(id: i64) -> String {
        format!("seckill:{{{id}}}:unlock")
    }
    /// Stock of segment `k` of `segmented`.
    pub fn segment(id: i64, k: u32) -> String {
        format!("seckill:{{{id}}}:seg:{k}")
    }
    /// Lock of segment `k` of `segmented`.
    pub fn segment_lock(id: i64, k: u32) -> String {
        format!("seckill:{{{id}}}:seg:{k}:lock")
    }
    /// Units held per buyer (a hash: buyer -> count), for `per_user_limit`.
    pub fn buyers(id: i64) -> String {
        format!("seckill:{{{id}}}:buyers")
    }
    /// A buyer's `Idempotency-Key` for one reset of the product: pending,
    /// or the answer of the sale it made.
    pub fn idempotency(id: i64, epoch: i64, buyer: &str, key: &str) -> String {
        // The buyer's length keeps `a:b` + `c` apart from `a` + `b:c`:
        // one buyer must never replay another's order.
        format!(
            "seckill:{{{id}}}:idem:{epoch}:{}:{buyer}:{key}",
            buyer.len()
        )
    }
    /// The stream of orders sold by Redis strategies, drained into
    /// PostgreSQL by every instance's order writer.
    pub const ORDERS: &str = "seckill:orders";
}
