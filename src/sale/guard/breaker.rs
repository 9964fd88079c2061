//! The circuit breaker of one backend path, after Sentinel's: closed, it
//! counts answers over a window, and opens when at least `min_calls` of
//! them came and `ratio` of them were bad (an error, an unknown outcome,
//! or slower than `slow`); open, it refuses at once for `open_for`; then
//! one request goes through as a probe (half-open) and its answer closes
//! the breaker or opens it again.
//!
//! The limit already keeps a slow path's answers near its target, so the
//! breaker is for the path that fails: a backend down, where every buyer
//! would otherwise wait for a connect timeout to learn what the previous
//! one learned.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use super::window::Window;

/// When the breaker opens and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Trip {
    /// An answer slower than this counts as bad.
    pub slow: Duration,
    /// The share of bad answers that opens it.
    pub ratio: f64,
    /// Answers the window must hold before it may open.
    pub min_calls: u64,
    /// How far back it counts.
    pub window: Duration,
    /// How long it stays open before a probe.
    pub open_for: Duration,
}

/// A breaker's state, as `/config` and the metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Requests go through and are counted.
    Closed,
    /// Requests are refused at once.
    Open,
    /// One probe is out; the others are refused until it answers.
    HalfOpen,
}

impl State {
    /// The number the metrics' gauge takes: 0 closed, 1 open, 2 half-open.
    pub fn gauge(self) -> f64 {
        match self {
            Self::Closed => 0.0,
            Self::Open => 1.0,
            Self::HalfOpen => 2.0,
        }
    }
}

#[derive(Debug)]
struct Inner {
    state: State,
    /// While open: when the next request may probe.
    until: Instant,
    answers: Window,
}

/// One path's breaker.
#[derive(Debug)]
pub struct Breaker {
    trip: Trip,
    inner: Mutex<Inner>,
}

/// What the breaker says to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Go on, counted.
    Pass,
    /// Go on as the probe: its answer decides.
    Probe,
    /// Refused: open (or a probe is out) for about this long.
    Refuse(Duration),
}

impl Breaker {
    /// A closed breaker.
    pub fn new(trip: Trip) -> Self {
        Self {
            trip,
            inner: Mutex::new(Inner {
                state: State::Closed,
                until: Instant::now(),
                answers: Window::new(trip.window),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a request may go on at `now`.
    pub fn admit(&self, now: Instant) -> Verdict {
        let mut inner = self.lock();
        match inner.state {
            State::Closed => Verdict::Pass,
            State::Open if now < inner.until => Verdict::Refuse(inner.until - now),
            State::Open => {
                inner.state = State::HalfOpen;
                Verdict::Probe
            }
            State::HalfOpen => Verdict::Refuse(self.trip.open_for),
        }
    }

    /// Whether an answer of this latency (and failure) counts as bad.
    pub fn bad(&self, latency: Duration, failed: bool) -> bool {
        failed || latency > self.trip.slow
    }

    /// A request's answer at `now`: `probe` if it was the probe; `bad`
    /// from [`Breaker::bad`]; `None` for a request dropped before it was
    /// answered (nothing learned: a dropped probe lets the next request
    /// probe). Returns the state after it.
    pub fn answered(&self, now: Instant, probe: bool, bad: Option<bool>) -> State {
        let mut inner = self.lock();
        let open_until = now + self.trip.open_for;
        match (probe, bad) {
            (true, None) => {
                inner.state = State::Open;
                inner.until = now;
            }
            (true, Some(true)) => {
                inner.state = State::Open;
                inner.until = open_until;
            }
            (true, Some(false)) => {
                inner.state = State::Closed;
                inner.answers.clear();
            }
            (false, Some(bad)) if inner.state == State::Closed => {
                inner.answers.add(now, bad);
                let counts = inner.answers.counts(now);
                let tripped = counts.total >= self.trip.min_calls
                    && counts.bad as f64 >= self.trip.ratio * counts.total as f64;
                if tripped {
                    inner.state = State::Open;
                    inner.until = open_until;
                    inner.answers.clear();
                }
            }
            (false, _) => {}
        }
        inner.state
    }

    /// The state now.
    pub fn state(&self) -> State {
        self.lock().state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trip() -> Trip {
        Trip {
            slow: Duration::from_secs(1),
            ratio: 0.5,
            min_calls: 4,
            window: Duration::from_secs(10),
            open_for: Duration::from_secs(2),
        }
    }

    #[test]
    fn opens_on_a_bad_ratio_refuses_then_probes_and_closes() {
        let breaker = Breaker::new(trip());
        let t = Instant::now();
        for (i, bad) in [false, true, false].into_iter().enumerate() {
            assert_eq!(breaker.admit(t), Verdict::Pass);
            let at = t + Duration::from_millis(i as u64);
            assert_eq!(breaker.answered(at, false, Some(bad)), State::Closed);
        }
        assert!(breaker.bad(Duration::from_secs(2), false), "slow is bad");
        assert_eq!(
            breaker.answered(t, false, Some(true)),
            State::Open,
            "2 of 4"
        );
        assert_eq!(
            breaker.admit(t + Duration::from_secs(1)),
            Verdict::Refuse(Duration::from_secs(1))
        );
        let later = t + Duration::from_secs(3);
        assert_eq!(breaker.admit(later), Verdict::Probe);
        assert!(
            matches!(breaker.admit(later), Verdict::Refuse(_)),
            "one probe at a time"
        );
        assert_eq!(
            breaker.answered(later, true, Some(true)),
            State::Open,
            "a bad probe"
        );
        let again = later + Duration::from_secs(2);
        assert_eq!(breaker.admit(again), Verdict::Probe);
        assert_eq!(
            breaker.answered(again, true, None),
            State::Open,
            "a dropped probe"
        );
        assert_eq!(
            breaker.admit(again),
            Verdict::Probe,
            "teaches nothing: probe again"
        );
        assert_eq!(breaker.answered(again, true, Some(false)), State::Closed);
        assert_eq!(breaker.admit(again), Verdict::Pass);
    }
}
