//! Retry pacing shared by spinning locks and optimistic retries.

use std::time::{Duration, Instant};

use rand::Rng;

/// Exponential backoff with jitter: 1, 2, 4 … 16 ms, each ±50 %, never past
/// `deadline`. Jitter keeps waiters from retrying in lock-step against the
/// same key or row.
pub fn delay(attempt: u32, deadline: Instant) -> Duration {
    let base = 1u64 << attempt.min(4);
    let jittered = rand::rng().random_range(base * 500..=base * 1500);
    Duration::from_micros(jittered).min(deadline.saturating_duration_since(Instant::now()))
}
