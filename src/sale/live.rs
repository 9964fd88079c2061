//! The live view's numbers: per product, what each second of the last
//! minute answered (sold, sold out, busy, limit reached, unknown, refused,
//! error) and how long it took, on every instance.
//!
//! Each instance counts its own answers in memory ([`LiveStats::record`]:
//! one short-held mutex, no backend touched on the buy path) and, once a
//! second, publishes its last minute to Redis ([`publish`]: one `SET` with
//! a short expiry and one `ZADD`), so that whichever instance serves
//! `GET /live` can add up every instance's ([`read`]). A reset forgets the
//! product's seconds on every instance (the reset broadcast), so a new
//! race starts from nothing.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use redis::AsyncCommands;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::error::ErrorCode;
pub use crate::model::telemetry::LIFE_EVENTS;

/// How many seconds back the view reaches.
pub const WINDOW_SECS: u64 = 60;

/// The answers the view tells apart, in the order of every count array.
pub const OUTCOMES: [&str; 8] = [
    "sold",
    "sold_out",
    "busy",
    "limit_reached",
    "unknown",
    "refused",
    "error",
    "rate_limited",
];

/// Upper bounds of the latency buckets, in ms; a last bucket holds the
/// rest. A percentile is told as its bucket's bound ("≤ 20 ms").
pub const BUCKETS_MS: [u64; 12] = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/// Products tracked at most: a flood of ids that exist cannot grow the
/// map past this (unknown ids are never recorded).
const MAX_PRODUCTS: usize = 1024;

/// Redis: the instances that published lately (member: name, score: ms).
const INSTANCES_KEY: &str = "seckill:live:instances";

/// One answer's kind, an index into [`OUTCOMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// 200.
    Sold = 0,
    /// `sold_out`, from the strategy or the instance's flag.
    SoldOut = 1,
    /// `busy`: nothing sold, try again.
    Busy = 2,
    /// `limit_reached`.
    LimitReached = 3,
    /// `outcome_unknown`.
    Unknown = 4,
    /// Outside the sale window or without a reservation.
    Refused = 5,
    /// A backend failed or was down.
    Error = 6,
    /// The buyer's token bucket was empty (429): nothing was tried.
    RateLimited = 7,
}

impl Answer {
    /// What the view counts an answer to a buy as: `None` for a sale
    /// (`Sold`), else the refusal's code; nothing for a product the
    /// service does not know (nothing to count it against) or a request
    /// refused before it named a product's sale.
    pub fn of(refused: Option<ErrorCode>) -> Option<Self> {
        let Some(code) = refused else {
            return Some(Self::Sold);
        };
        Some(match code {
            ErrorCode::SoldOut => Self::SoldOut,
            ErrorCode::Busy => Self::Busy,
            ErrorCode::LimitReached => Self::LimitReached,
            ErrorCode::OutcomeUnknown => Self::Unknown,
            ErrorCode::NotStarted
            | ErrorCode::Ended
            | ErrorCode::NotReserved
            | ErrorCode::BadPath => Self::Refused,
            ErrorCode::Backend | ErrorCode::Unavailable => Self::Error,
            ErrorCode::RateLimited => Self::RateLimited,
            _ => return None,
        })
    }
}

/// One second of one product on one instance (or added up).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Second {
    /// The second, since the Unix epoch.
    pub t: u64,
    /// Answers by kind, in [`OUTCOMES`]' order.
    pub counts: [u32; OUTCOMES.len()],
    /// Answers by latency bucket, in [`BUCKETS_MS`]' order, then the rest.
    pub latency: [u32; BUCKETS_MS.len() + 1],
    /// Order-life events, in [`LIFE_EVENTS`]' order (all 0 for a product
    /// without holds).
    #[serde(default)]
    pub life: [u32; LIFE_EVENTS.len()],
}

impl Second {
    fn add(&mut self, other: &Self) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a += b;
        }
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            *a += b;
        }
        for (a, b) in self.life.iter_mut().zip(other.life) {
            *a += b;
        }
    }
}

/// What one instance publishes: its seconds of the last minute, by product.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Snapshot {
    /// The instance's name (`served_by`).
    pub instance: String,
    /// Its seconds, oldest first, by product id.
    pub products: BTreeMap<i64, Vec<Second>>,
}

/// This instance's seconds.
#[derive(Default)]
pub struct LiveStats {
    /// A std mutex: held for one map update, never across an await.
    seconds: Mutex<HashMap<i64, VecDeque<Second>>>,
}

impl LiveStats {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, VecDeque<Second>>> {
        self.seconds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one answer for `product`, `took` after its request arrived,
    /// in the second `now_s`.
    pub fn record(&self, product: i64, answer: Answer, took: Duration, now_s: u64) {
        let mut map = self.map();
        let Some(second) = current(&mut map, product, now_s) else {
            return;
        };
        second.counts[answer as usize] += 1;
        let ms = took.as_millis() as u64;
        let bucket = BUCKETS_MS
            .iter()
            .position(|bound| ms <= *bound)
            .unwrap_or(BUCKETS_MS.len());
        second.latency[bucket] += 1;
    }

    /// Counts `n` order-life events of kind `event` (one of
    /// [`LIFE_EVENTS`]) for `product`, in the second `now_s`.
    pub fn record_life(&self, product: i64, event: &str, n: u32, now_s: u64) {
        let Some(index) = LIFE_EVENTS.iter().position(|e| *e == event) else {
            return;
        };
        if let Some(second) = current(&mut self.map(), product, now_s) {
            second.life[index] += n;
        }
    }

    /// Forgets product `id` (it was reset).
    pub fn forget(&self, id: i64) {
        self.map().remove(&id);
    }

    /// Forgets every product.
    pub fn forget_all(&self) {
        self.map().clear();
    }

    /// The last minute before `now_s`, as `instance` publishes it;
    /// products quiet for a minute are dropped.
    pub fn snapshot(&self, instance: &str, now_s: u64) -> Snapshot {
        let mut map = self.map();
        map.retain(|_, seconds| {
            seconds.retain(|s| s.t + WINDOW_SECS > now_s);
            !seconds.is_empty()
        });
        Snapshot {
            instance: instance.to_owned(),
            products: map
                .iter()
                .map(|(id, seconds)| (*id, seconds.iter().cloned().collect()))
                .collect(),
        }
    }
}

/// `product`'s second `now_s` in `map`, started if new (the minute
/// before it dropped); `None` when the map is full of other products.
fn current(
    map: &mut HashMap<i64, VecDeque<Second>>,
    product: i64,
    now_s: u64,
) -> Option<&mut Second> {
    if map.len() >= MAX_PRODUCTS && !map.contains_key(&product) {
        return None;
    }
    let seconds = map.entry(product).or_default();
    if seconds.back().is_none_or(|s| s.t != now_s) {
        seconds.push_back(Second {
            t: now_s,
            ..Second::default()
        });
    }
    while seconds.front().is_some_and(|s| s.t + WINDOW_SECS <= now_s) {
        seconds.pop_front();
    }
    seconds.back_mut()
}

fn snapshot_key(instance: &str) -> String {
    format!("seckill:live:instance:{instance}")
}

/// Once a second until `stopping` turns true: this instance's last minute
/// to Redis, kept 5 s (an instance that stops publishing drops out).
/// Best effort: a second Redis did not take is logged at debug level and
/// the next one tried.
pub async fn publish(
    backends: Backends,
    instance: String,
    stats: std::sync::Arc<LiveStats>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
) {
    while !*stopping.borrow() {
        let now = crate::model::product::now_ms();
        let snapshot = stats.snapshot(&instance, now / 1000);
        if let Err(error) = put(&backends, &snapshot, now).await {
            tracing::debug!(%error, "live snapshot not published");
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = stopping.changed() => {}
        }
    }
}

async fn put(backends: &Backends, snapshot: &Snapshot, now_ms: u64) -> Result<(), BackendError> {
    let json = serde_json::to_string(snapshot).expect("a snapshot serializes");
    let mut conn = backends.redis.get().await?;
    let () = conn
        .set_ex(snapshot_key(&snapshot.instance), json, 5)
        .await?;
    let () = conn.zadd(INSTANCES_KEY, &snapshot.instance, now_ms).await?;
    Ok(())
}

/// Every instance's last minute, as published within the last 5 s.
pub async fn read(backends: &Backends, now_ms: u64) -> Result<Vec<Snapshot>, BackendError> {
    let mut conn = backends.redis.get().await?;
    let since = now_ms.saturating_sub(5_000);
    let names: Vec<String> = conn.zrangebyscore(INSTANCES_KEY, since, "+inf").await?;
    let () = conn.zrembyscore(INSTANCES_KEY, "-inf", since).await?;
    let keys: Vec<String> = names.iter().map(|n| snapshot_key(n)).collect();
    let found: Vec<Option<String>> = conn.get_each(&keys).await?;
    Ok(found
        .into_iter()
        .flatten()
        .filter_map(|json| serde_json::from_str(&json).ok())
        .collect())
}

/// One product's minute, added up over the instances.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Minute {
    /// Its seconds with any answer, oldest first.
    pub seconds: Vec<Second>,
    /// Answers by kind over the minute, per instance.
    #[schema(value_type = BTreeMap<String, Vec<u32>>)]
    pub instances: Served,
}

/// Answers by kind, per instance.
type Served = BTreeMap<String, [u32; OUTCOMES.len()]>;

/// The snapshots' seconds of each product, added up.
pub fn merge(snapshots: &[Snapshot]) -> BTreeMap<i64, Minute> {
    let mut merged: BTreeMap<i64, (BTreeMap<u64, Second>, Served)> = BTreeMap::new();
    for snapshot in snapshots {
        for (id, seconds) in &snapshot.products {
            let (by_time, instances) = merged.entry(*id).or_default();
            let served = instances.entry(snapshot.instance.clone()).or_default();
            for second in seconds {
                by_time
                    .entry(second.t)
                    .or_insert_with(|| Second {
                        t: second.t,
                        ..Second::default()
                    })
                    .add(second);
                for (a, b) in served.iter_mut().zip(second.counts) {
                    *a += b;
                }
            }
        }
    }
    merged
        .into_iter()
        .map(|(id, (by_time, instances))| {
            (
                id,
                Minute {
                    seconds: by_time.into_values().collect(),
                    instances,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minute_is_kept_and_added_up_over_instances() {
        let a = LiveStats::default();
        let b = LiveStats::default();
        a.record(7, Answer::Sold, Duration::from_millis(3), 100);
        a.record(7, Answer::SoldOut, Duration::from_millis(30), 100);
        a.record(7, Answer::Sold, Duration::from_secs(9), 101);
        b.record(7, Answer::Busy, Duration::from_micros(10), 101);
        // A minute later the first second is gone.
        a.record(8, Answer::Sold, Duration::from_millis(1), 160);
        let merged = merge(&[a.snapshot("a", 160), b.snapshot("b", 160)]);
        let seven = &merged[&7];
        assert_eq!(seven.seconds.len(), 1, "{seven:?}");
        let second = &seven.seconds[0];
        assert_eq!((second.t, second.counts[0], second.counts[2]), (101, 1, 1));
        assert_eq!(
            second.latency[BUCKETS_MS.len()],
            1,
            "9 s is past every bound"
        );
        assert_eq!(second.latency[0], 1, "10 µs is within 1 ms");
        assert_eq!(seven.instances["a"][0], 1);
        assert_eq!(seven.instances["b"][2], 1);
        assert_eq!(merged[&8].seconds[0].counts[0], 1);
        a.forget(8);
        assert!(!a.snapshot("a", 160).products.contains_key(&8));
    }
}
