//! `backend-slowdown`'s numbers from one race: what the buyers got within
//! their patience, what the backend sold, when goodput came back.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::race::attempt::Attempt;
use crate::race::driver::percentile_ms;

/// The stock counter, read at one instant: two of them tell what the
/// backend sold in between.
#[derive(Clone, Copy)]
pub struct Counted {
    /// When it was read (halfway through the read's round trip).
    pub at: Instant,
    /// The units left.
    pub remaining: i64,
}

impl Counted {
    /// Units sold per second from `self` to `later`, whoever waited for
    /// them: the counter moves when the backend sells, however long the
    /// sale queued before.
    pub fn rate_to(self, later: Counted) -> f64 {
        let secs = later.at.saturating_duration_since(self.at).as_secs_f64();
        (self.remaining - later.remaining) as f64 / secs.max(1e-9)
    }
}

/// When each part of the race begins.
pub struct Phases {
    /// Healthy goodput is counted from here (past the warm-up)…
    healthy_from: Instant,
    /// … to the slowdown.
    pub slowed: Instant,
    /// The slowdown's steady part, past the transition.
    pub steady: Instant,
    /// The link heals.
    pub healed: Instant,
    /// The buyers stop.
    pub end: Instant,
}

impl Phases {
    /// From `start`: `healthy`, then `slowed` (its first `settle` the
    /// transition), then `healed`.
    pub fn from(
        start: Instant,
        healthy: Duration,
        slowed: Duration,
        settle: Duration,
        healed: Duration,
    ) -> Self {
        let slow_at = start + healthy;
        Self {
            healthy_from: start + healthy / 3,
            slowed: slow_at,
            steady: slow_at + settle,
            healed: slow_at + slowed,
            end: slow_at + slowed + healed,
        }
    }
}

/// One race's numbers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SlowdownOutcome {
    /// With the adaptive limit and the breaker on.
    pub guarded: bool,
    /// Sales answered within the patience per second, before the slowdown.
    pub healthy_goodput: f64,
    /// The same, in the slowdown's steady part.
    pub goodput: f64,
    /// Sales the backend made per second then (its stock counter's fall
    /// from the steady part's start to its end), answered in time or not.
    pub sales: f64,
    /// The slowed path's capacity: the more `sales` of the path's two
    /// races.
    pub capacity: f64,
    /// Median latency of the requests sent in the steady part and not
    /// refused at once (a buyer who hung up counts as the patience).
    pub p50_ms: f64,
    /// 99th percentile of the same.
    pub p99_ms: f64,
    /// The path's adaptive limit at the end of the slowdown (`None`: off).
    pub limit: Option<u64>,
    /// Requests answered `busy` during the slowdown.
    pub refused: u64,
    /// Buyers who hung up without an answer during the slowdown.
    pub gave_up: u64,
    /// `outcome_unknown` answers during the slowdown.
    pub unknown: u64,
    /// Units sold to buyers who never got their 200 (they hung up).
    pub wasted: u64,
    /// From the heal until a quarter second's goodput is back to 80 % of
    /// the healthy goodput; `None` if not before the race ended.
    pub recovery_ms: Option<u64>,
}

/// The numbers of one race: its `attempts`, the buyer of each of the
/// product's orders, and the backend's `sales` per second in the steady
/// part (see [`Counted`]).
pub fn tally(
    attempts: &[Attempt],
    buyers: &[String],
    phases: &Phases,
    patience: Duration,
    guarded: bool,
    sales: f64,
) -> SlowdownOutcome {
    let in_time = |a: &Attempt| a.answer.status == 200 && a.took <= patience;
    let code = |a: &Attempt, c: &str| a.answer.code.as_deref() == Some(c);
    let sent_in = |from: Instant, to: Instant| {
        attempts
            .iter()
            .filter(move |a| a.sent >= from && a.sent < to)
    };
    let per_sec = |n: usize, from: Instant, to: Instant| {
        n as f64 / to.saturating_duration_since(from).as_secs_f64().max(1e-9)
    };
    let (steady, healed) = (phases.steady, phases.healed);
    let healthy_goodput = per_sec(
        sent_in(phases.healthy_from, phases.slowed)
            .filter(|a| in_time(a))
            .count(),
        phases.healthy_from,
        phases.slowed,
    );
    let mut admitted: Vec<Duration> = sent_in(steady, healed)
        .filter(|a| !code(a, "busy"))
        .map(|a| a.took.min(patience))
        .collect();
    admitted.sort();
    let answered: HashMap<&str, bool> = attempts
        .iter()
        .map(|a| (a.buyer.as_str(), a.answer.status == 200))
        .collect();
    let slowed = || sent_in(phases.slowed, healed);
    SlowdownOutcome {
        guarded,
        healthy_goodput,
        goodput: per_sec(
            sent_in(steady, healed).filter(|a| in_time(a)).count(),
            steady,
            healed,
        ),
        sales,
        capacity: 0.0,
        p50_ms: percentile_ms(&admitted, 0.50),
        p99_ms: percentile_ms(&admitted, 0.99),
        limit: None,
        refused: slowed().filter(|a| code(a, "busy")).count() as u64,
        gave_up: slowed().filter(|a| a.answer.status == 0).count() as u64,
        unknown: slowed().filter(|a| code(a, "outcome_unknown")).count() as u64,
        wasted: buyers
            .iter()
            .filter(|buyer| !answered.get(buyer.as_str()).copied().unwrap_or(false))
            .count() as u64,
        recovery_ms: recovery(attempts, phases, healthy_goodput, in_time),
    }
}

/// A quarter second's buckets from the heal.
const BUCKET: Duration = Duration::from_millis(250);

/// From the heal to the first bucket whose goodput is 80 % of `healthy`.
fn recovery(
    attempts: &[Attempt],
    phases: &Phases,
    healthy: f64,
    in_time: impl Fn(&Attempt) -> bool,
) -> Option<u64> {
    let mut from = phases.healed;
    while from + BUCKET <= phases.end {
        let good = attempts
            .iter()
            .filter(|a| a.sent >= from && a.sent < from + BUCKET && in_time(a))
            .count();
        if good as f64 / BUCKET.as_secs_f64() >= 0.8 * healthy {
            return Some((from - phases.healed).as_millis() as u64);
        }
        from += BUCKET;
    }
    None
}
