//! The adaptive concurrency limit of one backend path: AIMD whose signal
//! is an answer later than the latency target, and whose decrease is set
//! by Little's law.
//!
//! Why AIMD and not Gradient2 or Vegas: those two steer by the ratio of
//! the recent round trip to a remembered no-load one, and a slowdown that
//! lasts (a slow disk, a failover) moves the very baseline they compare
//! against: Vegas' minimum keeps the old, fast round trip and starves the
//! path, Gradient2's long-term average drifts up and lets the queue grow
//! back. What a buyer waits for is an answer within their patience, so
//! the signal here is an absolute one: an answer later than `target`.
//! On one, the limit drops at once to what the path can answer within
//! the target at the rate it answers now (Little's law: in flight = rate
//! × time in the system), never below `floor`; each answer faster than
//! half the target, while the limit is in use, adds one (the additive
//! increase). Between half the target and the target it holds, so a
//! slowed path settles with answers between the two. No crate: the ones
//! that exist (`tower-acc`, `tower-resilience-adaptive`) are tower layers
//! that make a request wait for a slot, where here the path is known only
//! once the product is, and the excess is answered at once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::window::Window;

/// How far back the rate of answers is measured.
const RATE_SPAN: Duration = Duration::from_secs(1);

/// One path's limit and what is in flight on it.
#[derive(Debug)]
pub struct Limit {
    limit: AtomicUsize,
    in_flight: AtomicUsize,
    floor: usize,
    ceiling: usize,
    target: Duration,
    answers: Mutex<Window>,
}

impl Limit {
    /// Starting at `ceiling` (a healthy path is never refused), moving
    /// between `floor` and `ceiling` to keep answers within `target`.
    pub fn new(floor: usize, ceiling: usize, target: Duration) -> Self {
        let floor = floor.clamp(1, ceiling.max(1));
        Self {
            limit: AtomicUsize::new(ceiling.max(floor)),
            in_flight: AtomicUsize::new(0),
            floor,
            ceiling: ceiling.max(floor),
            target,
            answers: Mutex::new(Window::new(RATE_SPAN)),
        }
    }

    /// Takes a slot if one is free under the limit.
    pub fn try_acquire(&self) -> bool {
        let now = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        if now > self.limit.load(Ordering::Acquire) {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Gives a slot back without a measurement (the request was dropped
    /// before its answer, or failed): neither a cut nor an increase.
    pub fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Gives a slot back with the answer's latency, `at` the moment of the
    /// answer, and moves the limit.
    pub fn answered(&self, latency: Duration, at: Instant) {
        let in_flight = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        let rate = {
            let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            answers.add(at, false);
            answers.counts(at).total as f64 / answers.span().as_secs_f64()
        };
        if latency > self.target {
            let little = (rate * self.target.as_secs_f64()).ceil() as usize;
            self.limit
                .fetch_min(little.max(self.floor), Ordering::AcqRel);
        } else if latency * 2 <= self.target {
            let limit = self.limit.load(Ordering::Acquire);
            if in_flight * 2 >= limit && limit < self.ceiling {
                let _ = self.limit.compare_exchange(
                    limit,
                    limit + 1,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Duration = Duration::from_millis(500);

    #[test]
    fn a_late_answer_cuts_to_what_the_rate_answers_within_the_target() {
        let limit = Limit::new(4, 1_000, TARGET);
        let start = Instant::now();
        // 100 answers in the last second, all in time: 100 per second.
        for i in 0..100 {
            assert!(limit.try_acquire());
            limit.answered(
                Duration::from_millis(300),
                start + Duration::from_millis(i * 5),
            );
        }
        assert_eq!(limit.limit(), 1_000, "answers in time do not cut");
        assert!(limit.try_acquire());
        limit.answered(Duration::from_secs(2), start + Duration::from_millis(600));
        // 101 answers in the last second × 0.5 s.
        assert_eq!(limit.limit(), 51);
    }

    #[test]
    fn the_excess_is_refused_and_fast_answers_in_use_raise_the_limit() {
        let limit = Limit::new(2, 10, TARGET);
        let start = Instant::now();
        assert!(limit.try_acquire());
        limit.answered(Duration::from_secs(1), start);
        assert_eq!(limit.limit(), 2, "one answer in a second: the floor");
        assert!(limit.try_acquire() && limit.try_acquire());
        assert!(!limit.try_acquire(), "a third is over the limit");
        assert_eq!(limit.in_flight(), 2);
        limit.answered(Duration::from_millis(10), start);
        assert_eq!(limit.limit(), 3, "fast, with the limit in use: one more");
        limit.answered(Duration::from_millis(10), start);
        assert_eq!(limit.limit(), 3, "fast, but nothing in flight: held");
        assert!(limit.try_acquire());
        limit.answered(Duration::from_millis(400), start);
        assert_eq!(limit.limit(), 3, "between half the target and it: held");
        assert!(limit.try_acquire());
        limit.release();
        assert_eq!(limit.in_flight(), 0);
    }
}
