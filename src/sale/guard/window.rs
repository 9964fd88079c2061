//! Answers counted over the last stretch of time, in ten buckets: how
//! many, and how many of them were bad. The limit reads the rate; the
//! breaker, the ratio.

use std::time::{Duration, Instant};

/// Buckets per window: an answer leaves the count between 90 % and 100 %
/// of the window after it came.
const BUCKETS: usize = 10;

/// One bucket: its slot number since the window's start, and its counts.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    slot: u64,
    total: u64,
    bad: u64,
}

/// The counts of the last `span`.
#[derive(Debug)]
pub struct Window {
    origin: Instant,
    width: Duration,
    buckets: [Bucket; BUCKETS],
}

/// What a window holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Answers.
    pub total: u64,
    /// Bad answers among them.
    pub bad: u64,
}

impl Window {
    /// A window over the last `span` (at least 10 ms).
    pub fn new(span: Duration) -> Self {
        Self {
            origin: Instant::now(),
            width: (span / BUCKETS as u32).max(Duration::from_millis(1)),
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    fn slot(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.origin).as_nanos() / self.width.as_nanos()) as u64
    }

    /// Counts one answer at `at`.
    pub fn add(&mut self, at: Instant, bad: bool) {
        let slot = self.slot(at);
        let bucket = &mut self.buckets[slot as usize % BUCKETS];
        if bucket.slot != slot {
            *bucket = Bucket {
                slot,
                ..Bucket::default()
            };
        }
        bucket.total += 1;
        bucket.bad += u64::from(bad);
    }

    /// The answers of the last window as of `at`.
    pub fn counts(&self, at: Instant) -> Counts {
        let now = self.slot(at);
        self.buckets
            .iter()
            .filter(|b| b.total > 0 && now.saturating_sub(b.slot) < BUCKETS as u64 && b.slot <= now)
            .fold(Counts::default(), |sum, b| Counts {
                total: sum.total + b.total,
                bad: sum.bad + b.bad,
            })
    }

    /// Forgets every answer.
    pub fn clear(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_leave_the_window_once_it_has_passed() {
        let mut window = Window::new(Duration::from_secs(1));
        let start = window.origin;
        window.add(start, false);
        window.add(start + Duration::from_millis(150), true);
        let counts = window.counts(start + Duration::from_millis(500));
        assert_eq!(counts, Counts { total: 2, bad: 1 });
        let later = window.counts(start + Duration::from_millis(1_050));
        assert_eq!(
            later,
            Counts { total: 1, bad: 1 },
            "the first left, the second stays"
        );
        assert_eq!(
            window.counts(start + Duration::from_secs(5)),
            Counts::default()
        );
        window.add(start + Duration::from_secs(5), false);
        assert_eq!(window.counts(start + Duration::from_secs(5)).total, 1);
    }
}
