//! One clock for every instance: the main Redis's, read through an offset.
//!
//! The sale window (its opening, its close, the waves), a hold's
//! `pay_by_ms` and a buy path's expiry are moments every instance must
//! agree on; an instance judging them by its own clock sells early (or
//! refuses late) by however far that clock is off — 60 s ahead under
//! `faketime` sold a unit 30 s before the opening. So each instance reads
//! Redis's `TIME` once a second and keeps the offset between it and its
//! own monotonic clock: `now_ms` is one atomic load and an addition, the
//! flood before the opening is still answered from memory, and no wall
//! clock of the instance's is read at all for these judgements. The error
//! is half the round trip of the best of three samples (sub-millisecond
//! on one host) plus the drift of the monotonic clock between syncs. An
//! instance serves only once it has synced (`serve`); if Redis stops
//! answering, the last offset stands and the monotonic clock runs on.
//!
//! Why not each store's own time inside each selling step (Redis `TIME`
//! in the script, `now()` in the statement): eighteen strategies on three
//! stores would each carry the check, the early answers would need a
//! round trip, and the stores' clocks could disagree among themselves.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use uuid::timestamp::context::ContextV7;
use uuid::{Timestamp, Uuid};

use super::failure::BackendError;
use super::master::RedisPool;

/// The process's monotonic origin.
static START: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Samples per sync: the one with the shortest round trip is kept.
const SAMPLES: usize = 3;
/// How often the offset is refreshed.
pub const EVERY: Duration = Duration::from_secs(1);

/// This machine's wall clock, ms since the Unix epoch.
fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as i64
}

fn mono_ms() -> i64 {
    START.elapsed().as_millis() as i64
}

/// The shared clock: Redis's time, as this instance last measured it.
#[derive(Debug)]
pub struct SharedClock {
    /// Redis's ms since the Unix epoch, less this process's monotonic ms.
    offset_ms: AtomicI64,
}

impl Default for SharedClock {
    /// Until the first sync: the instance's own wall clock.
    fn default() -> Self {
        Self {
            offset_ms: AtomicI64::new(wall_ms() - mono_ms()),
        }
    }
}

impl SharedClock {
    /// A clock that starts `by_ms` off this machine's, as an instance
    /// with a wrong clock would: until its first [`SharedClock::sync`].
    pub fn off_by(by_ms: i64) -> Self {
        let clock = Self::default();
        clock.offset_ms.fetch_add(by_ms, Ordering::Relaxed);
        clock
    }

    /// Now on the shared clock, in ms since the Unix epoch.
    pub fn now_ms(&self) -> u64 {
        (mono_ms() + self.offset_ms.load(Ordering::Relaxed)).max(0) as u64
    }

    /// Reads Redis's `TIME` a few times and keeps the offset of the
    /// sample with the shortest round trip; answers that round trip.
    pub async fn sync(&self, redis: &RedisPool) -> Result<Duration, BackendError> {
        let mut conn = redis.get().await?;
        let mut best: Option<(Duration, i64)> = None;
        for _ in 0..SAMPLES {
            let sent = mono_ms();
            let before = Instant::now();
            let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(&mut conn).await?;
            let rtt = before.elapsed();
            // Redis read its clock about halfway through the round trip.
            let at = sent + (rtt.as_millis() as i64) / 2;
            let offset = secs * 1000 + micros / 1000 - at;
            if best.is_none_or(|(shortest, _)| rtt < shortest) {
                best = Some((rtt, offset));
            }
        }
        let (rtt, offset) = best.expect("at least one sample");
        self.offset_ms.store(offset, Ordering::Relaxed);
        Ok(rtt)
    }

    /// A fresh order id: a version-7 UUID whose time is the shared
    /// clock's, so that a hold's `pay_by_ms` (read from its id) means the
    /// same moment to every instance and reaper.
    pub fn order_id(&self) -> Uuid {
        static CONTEXT: LazyLock<Mutex<AssertUnwindSafe<ContextV7>>> =
            LazyLock::new(|| Mutex::new(AssertUnwindSafe(ContextV7::new())));
        let now = self.now_ms();
        let ts = Timestamp::from_unix(&*CONTEXT, now / 1000, (now % 1000) as u32 * 1_000_000);
        Uuid::new_v7(ts)
    }

    /// Syncs once a second until `stopping` turns true; a failed sync
    /// keeps the last offset.
    pub async fn keep_synced(
        &self,
        redis: RedisPool,
        mut stopping: tokio::sync::watch::Receiver<bool>,
    ) {
        while !*stopping.borrow() {
            tokio::select! {
                _ = tokio::time::sleep(EVERY) => {}
                _ = stopping.changed() => return,
            }
            if let Err(error) = self.sync(&redis).await {
                tracing::warn!(%error, "the shared clock was not synced; its last offset stands");
            }
        }
    }
}
