//! Retry pacing shared by spinning locks and optimistic retries.

use std::time::{Duration, Instant};

use rand::Rng;

/// Exponential backoff with jitter: 1, 2, 4 … 16 ms, each ±50 %, never past
/// `deadline`. Jitter keeps waiters from retrying in lock-step against the
/// same key or row.
pub fn delay(attempt: u32, deadline: Instant) -> Duration {
    delay_up_to(attempt, 16, deadline)
}

/// Like [`delay`], doubling from 1 ms up to `max_ms`. Locks whose every
/// attempt costs a database statement back off further, so spinning
/// waiters do not take the connections the holder needs.
pub fn delay_up_to(attempt: u32, max_ms: u64, deadline: Instant) -> Duration {
    let base = (1u64 << attempt.min(20)).min(max_ms.max(1));
    let jittered = rand::rng().random_range(base * 500..=base * 1500);
    Duration::from_micros(jittered).min(deadline.saturating_duration_since(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_and_never_passes_the_deadline() {
        let far = Instant::now() + Duration::from_secs(60);
        assert!(delay(0, far) <= Duration::from_micros(1500));
        assert!(delay(10, far) <= Duration::from_micros(24_000));
        assert!(delay_up_to(10, 64, far) >= Duration::from_millis(32));
        assert_eq!(delay(3, Instant::now()), Duration::ZERO);
    }
}
