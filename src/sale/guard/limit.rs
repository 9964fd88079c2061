//! The adaptive concurrency limit of one backend path: AIMD whose signal
//! is an answer later than the latency target, and whose decrease is set
//! by that answer and by Little's law.
//!
//! Why AIMD and not Gradient2 or Vegas: those two steer by the ratio of
//! the recent round trip to a remembered no-load one, and a slowdown that
//! lasts (a slow disk, a failover) moves the very baseline they compare
//! against: Vegas' minimum keeps the old, fast round trip and starves the
//! path, Gradient2's long-term average drifts up and lets the queue grow
//! back. What a buyer waits for is an answer within their patience, so
//! the signal here is an absolute one: an answer later than `target`.
//!
//! On one, the limit drops at once to the smaller of two estimates, never
//! below `floor`:
//! - what the path answers within the target at the rate it answers now
//!   (Little's law: in flight = rate × time in the system), right for a
//!   path that serves in order, such as a connection pool's queue;
//! - what was in flight when the late request came in, scaled by how
//!   late it is (in flight × target / latency), right for a path that
//!   serves in no order, such as a lock its waiters poll for: there a
//!   late answer is the tail of a spread of waits whose mean Little's law
//!   sets, and only fewer waiters shorten the tail.
//!
//! Every late answer cuts (the limit only ever drops to the smallest
//! estimate): a first cut made while the rate was still the healthy one
//! would otherwise stand until its own admissions came back late, a
//! whole queue later. Each answer faster than half the target, while the
//! limit is in use and no answer of the last second was late, adds one
//! (the additive increase). Between half the target and the target it holds,
//! so a slowed path settles with answers between the two. No crate: the
//! ones that exist (`tower-acc`, `tower-resilience-adaptive`) are tower
//! layers that make a request wait for a slot, where here the path is
//! known only once the product is, and the excess is answered at once.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::window::Window;

/// How far back the rate of answers, and the late ones, are counted.
const RATE_SPAN: Duration = Duration::from_secs(1);

/// One path's limit and what is in flight on it.
#[derive(Debug)]
pub struct Limit {
    limit: AtomicUsize,
    in_flight: AtomicUsize,
    floor: usize,
    ceiling: usize,
    target: Duration,
    /// Answers of the last second, the late ones counted as bad.
    answers: Mutex<Window>,
}

/// A request's place under the limit: how many were in flight with it
/// (it included) when it came in, which its answer is judged against.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    in_flight: usize,
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
    pub fn try_acquire(&self) -> Option<Slot> {
        let in_flight = self.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        if in_flight > self.limit.load(Ordering::Acquire) {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot { in_flight })
    }

    /// Gives a slot back without a measurement (the request was dropped
    /// before its answer, or failed): neither a cut nor an increase.
    pub fn release(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Gives `slot` back with the answer's latency, `at` the moment of
    /// the answer, and moves the limit.
    pub fn answered(&self, slot: Slot, latency: Duration, at: Instant) {
        let in_flight = self.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        let late = latency > self.target;
        let counts = {
            let mut answers = self.answers.lock().unwrap_or_else(|e| e.into_inner());
            answers.add(at, late);
            answers.counts(at)
        };
        if late {
            let target = self.target.as_secs_f64();
            let rate = counts.total as f64 / RATE_SPAN.as_secs_f64();
            let little = (rate * target).ceil() as usize;
            let tail = (slot.in_flight as f64 * target / latency.as_secs_f64()).ceil() as usize;
            self.limit
                .fetch_min(little.min(tail).max(self.floor), Ordering::AcqRel);
        } else if latency * 2 <= self.target && counts.bad == 0 {
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

    /// `n` requests in at once, then answered `latency` later at `at`.
    fn answer(limit: &Limit, n: usize, latency: Duration, at: Instant) {
        let slots: Vec<_> = (0..n).map(|_| limit.try_acquire().unwrap()).collect();
        for slot in slots {
            limit.answered(slot, latency, at);
        }
    }

    /// A limit over `floor`..1,000 that has answered 100 requests in time
    /// over the half second from `start`: 100 per second.
    fn answering_100_a_second(floor: usize) -> (Limit, Instant) {
        let limit = Limit::new(floor, 1_000, TARGET);
        let start = Instant::now();
        for i in 0..100 {
            let at = start + Duration::from_millis(i * 5);
            answer(&limit, 1, Duration::from_millis(300), at);
        }
        (limit, start)
    }

    #[test]
    fn a_late_answer_cuts_to_what_the_rate_answers_within_the_target() {
        let (limit, start) = answering_100_a_second(4);
        assert_eq!(limit.limit(), 1_000, "answers in time do not cut");
        // 300 in flight, one answered at 2 s: the tail's estimate is 75,
        // Little's 101 answers in the last second × 0.5 s.
        let mut slots: Vec<_> = (0..300).map(|_| limit.try_acquire().unwrap()).collect();
        let last = slots.pop().unwrap();
        limit.answered(
            last,
            Duration::from_secs(2),
            start + Duration::from_millis(600),
        );
        assert_eq!(limit.limit(), 51, "a queue in order: Little's law");
    }

    #[test]
    fn a_late_answer_from_few_in_flight_cuts_by_how_late_it_is() {
        let (limit, start) = answering_100_a_second(2);
        // 40 in flight, the first answered at 1 s: 40 × 0.5 / 1 = 20.
        let mut slots: Vec<_> = (0..40).map(|_| limit.try_acquire().unwrap()).collect();
        let last = slots.pop().unwrap();
        let at = start + Duration::from_millis(600);
        limit.answered(last, Duration::from_secs(1), at);
        assert_eq!(
            limit.limit(),
            20,
            "waits in no order: only fewer shorten the tail"
        );
        // The 20th in, answered at 2 s: 20 × 0.5 / 2 = 5.
        limit.answered(slots[19], Duration::from_secs(2), at);
        assert_eq!(limit.limit(), 5, "each late answer cuts again");
        // A cut never raises it, and never goes under the floor.
        limit.answered(slots[38], Duration::from_secs(1), at);
        assert_eq!(limit.limit(), 5);
        limit.answered(slots[0], Duration::from_secs(5), at);
        assert_eq!(limit.limit(), 2, "never under the floor");
    }

    #[test]
    fn the_excess_is_refused_and_fast_answers_in_use_raise_the_limit() {
        let limit = Limit::new(2, 10, TARGET);
        let start = Instant::now();
        answer(&limit, 1, Duration::from_secs(1), start);
        assert_eq!(limit.limit(), 2, "one answer in a second: the floor");
        let (a, b) = (limit.try_acquire().unwrap(), limit.try_acquire().unwrap());
        assert!(limit.try_acquire().is_none(), "a third is over the limit");
        assert_eq!(limit.in_flight(), 2);
        let calm = start + Duration::from_millis(1_500);
        limit.answered(a, Duration::from_millis(10), start);
        assert_eq!(
            limit.limit(),
            2,
            "fast, but a late answer in the last second: held"
        );
        limit.answered(b, Duration::from_millis(10), calm);
        assert_eq!(limit.limit(), 2, "fast, but nothing else in flight: held");
        let (a, b) = (limit.try_acquire().unwrap(), limit.try_acquire().unwrap());
        limit.answered(a, Duration::from_millis(10), calm);
        assert_eq!(limit.limit(), 3, "fast, with the limit in use: one more");
        limit.answered(b, Duration::from_millis(400), calm);
        assert_eq!(limit.limit(), 3, "between half the target and it: held");
        assert!(limit.try_acquire().is_some());
        limit.release();
        assert_eq!(limit.in_flight(), 0);
    }
}
