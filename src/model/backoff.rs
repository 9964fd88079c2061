//! Retry pacing shared by spinning locks and optimistic retries.

use std::time::{Duration, Instant};

use rand::Rng;

/// Exponential backoff with jitter: 1, 2, 4 … 16 ms, each ±50 %, never past
/// `deadline`. Jitter keeps waiters from retrying in lock-step against the
/// same key or row.
pub fn delay(attempt: u32, deadline: Instant) -> Duration {
    jittered(1u64 << attempt.min(4), deadline)
}

/// Backoff that grows with how long the buyer has already waited (a
/// quarter of it, from 1 ms up to `max_ms`), ±50 %. Unlike an attempt
/// count it survives the caller slicing the wait to re-check the stock, so
/// a long-waiting crowd settles to a few attempts per second each instead
/// of restarting at 1 ms every slice — which matters when every attempt is
/// a database statement the holder competes with.
pub fn delay_since(started: Instant, max_ms: u64, deadline: Instant) -> Duration {
    let waited_ms = started.elapsed().as_millis() as u64;
    jittered((waited_ms / 4).clamp(1, max_ms.max(1)), deadline)
}

fn jittered(base_ms: u64, deadline: Instant) -> Duration {
    let micros = rand::rng().random_range(base_ms * 500..=base_ms * 1500);
    Duration::from_micros(micros).min(deadline.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_and_never_passes_the_deadline() {
        let far = Instant::now() + Duration::from_secs(60);
        assert!(delay(0, far) <= Duration::from_micros(1500));
        assert!(delay(10, far) <= Duration::from_micros(24_000));
        let long_ago = Instant::now() - Duration::from_secs(10);
        assert!(delay_since(long_ago, 256, far) >= Duration::from_millis(128));
        assert!(delay_since(Instant::now(), 256, far) <= Duration::from_micros(1500));
        assert_eq!(delay(3, Instant::now()), Duration::ZERO);
    }
}
