//! Metrics: what `GET /metrics` exposes, in Prometheus' text format, from
//! the `metrics` facade and its Prometheus recorder.
//!
//! Every name is written here once, next to what it means; the rest of the
//! code calls these functions rather than spelling metric names. Counters
//! are per instance (the gateway round-robins, so a race's counts are the
//! sum over the instances' `/metrics`).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use metrics::{
    Counter, Gauge, Histogram, counter, describe_counter, describe_gauge, describe_histogram,
    gauge, histogram,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Buy attempts by strategy and outcome.
pub const BUYS: &str = "seckill_buys_total";
/// How long a buy that ran its strategy took, from the request's arrival
/// to the outcome, by strategy: what the dashboards' p50 and p99 are.
pub const BUY_DURATION: &str = "seckill_buy_duration_seconds";
/// Buys answered `sold_out` from the instance's memory (no strategy ran).
pub const SOLD_OUT_FLAG: &str = "seckill_sold_out_flag_total";
/// Time from the start of a buy until its lock was held, by strategy.
pub const LOCK_WAIT: &str = "seckill_lock_wait_seconds";
/// Time a lock was held (the critical section), by strategy.
pub const LOCK_HOLD: &str = "seckill_lock_hold_seconds";
/// Orders per batch the order writer stored.
pub const WRITER_BATCH: &str = "seckill_order_writer_batch_size";
/// Age of an order when the writer stored it in PostgreSQL (from its
/// stream id's timestamp to the commit).
pub const WRITER_LAG: &str = "seckill_order_writer_lag_seconds";
/// Buyers per group a group-commit strategy sold in one step, by
/// strategy.
pub const GROUP_SIZE: &str = "seckill_group_size";
/// How long a buyer of a group-commit strategy waited in its queue for
/// its group to start, by strategy.
pub const GROUP_WAIT: &str = "seckill_group_wait_seconds";
/// Requests the instance turned away before any strategy ran, by reason
/// (`rate_limited`, `buyer_rate_limited`, `overloaded`, `timeout`).
pub const REJECTED: &str = "seckill_rejected_total";

/// A backend path's adaptive concurrency limit now, by path
/// (`strategy@store`).
pub const ADAPTIVE_LIMIT: &str = "seckill_adaptive_limit";
/// Buys in flight on a backend path now, by path.
pub const PATH_IN_FLIGHT: &str = "seckill_path_in_flight";
/// A backend path's circuit breaker: 0 closed, 1 open, 2 half-open.
pub const BREAKER_STATE: &str = "seckill_breaker_state";
/// Buys a path's guards answered `busy` at once, by path and by which
/// guard (`limit`, `breaker`).
pub const SHED: &str = "seckill_shed_total";

/// An order's life after the sale, by event: `paid`, `late_payment` (a
/// payment told `expired`), `cancelled`, `given_back` (units back on sale).
pub const ORDER_LIFE: &str = "seckill_order_life_total";
/// How long after its due time a hold was expired by a reaper: how far
/// behind the reaper runs.
pub const REAPER_LAG: &str = "seckill_reaper_lag_seconds";
/// Every order-life event ([`ORDER_LIFE`]'s), each at 0 from the start.
pub const LIFE_EVENTS: [&str; 4] = ["paid", "late_payment", "cancelled", "given_back"];

/// Every reason a request is turned away for ([`rejected`]'s): each
/// series exists from the start at 0, so a dashboard's `rate()` shows a
/// flat zero rather than no data until the first rejection.
pub const REJECT_REASONS: [&str; 4] = [
    "rate_limited",
    "buyer_rate_limited",
    "overloaded",
    "timeout",
];

/// Latency buckets in seconds: 1 ms to 10 s.
const SECONDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Batch-size buckets, up to the writer's batch limit (and the groups').
const BATCH: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0];

/// Installs the process-wide recorder once (tests may start several
/// servers in one process) and returns the handle that renders it.
pub fn install() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let handle = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full(WRITER_BATCH.into()), BATCH))
                .and_then(|b| b.set_buckets_for_metric(Matcher::Full(GROUP_SIZE.into()), BATCH))
                .expect("the buckets are not empty")
                .install_recorder()
                .expect("the only recorder of this process");
            describe();
            handle
        })
        .clone()
}

/// Drains the histograms' lock-free buffers every few seconds (the
/// recorder does not, and they would grow between scrapes) until
/// `shutdown` turns true.
pub async fn upkeep(handle: PrometheusHandle, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    while !*shutdown.borrow() {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => handle.run_upkeep(),
            _ = shutdown.changed() => {}
        }
    }
}

fn describe() {
    describe_counter!(BUYS, "Buy attempts by strategy and outcome.");
    describe_histogram!(
        BUY_DURATION,
        metrics::Unit::Seconds,
        "Time a buy took, arrival to outcome, when its strategy ran."
    );
    describe_counter!(SOLD_OUT_FLAG, "Buys answered sold_out from memory.");
    describe_histogram!(
        LOCK_WAIT,
        metrics::Unit::Seconds,
        "Time until the lock was held."
    );
    describe_histogram!(LOCK_HOLD, metrics::Unit::Seconds, "Time the lock was held.");
    describe_histogram!(
        WRITER_BATCH,
        metrics::Unit::Count,
        "Orders per stored batch."
    );
    describe_histogram!(
        WRITER_LAG,
        metrics::Unit::Seconds,
        "Age of an order when the writer stored it."
    );
    describe_counter!(REJECTED, "Requests turned away before any strategy ran.");
    describe_gauge!(
        ADAPTIVE_LIMIT,
        "A backend path's adaptive concurrency limit."
    );
    describe_gauge!(PATH_IN_FLIGHT, "Buys in flight on a backend path.");
    describe_gauge!(
        BREAKER_STATE,
        "A path's circuit breaker: 0 closed, 1 open, 2 half-open."
    );
    describe_counter!(
        SHED,
        "Buys a path's limit or breaker answered busy at once."
    );
    for reason in REJECT_REASONS {
        counter!(REJECTED, "reason" => reason).increment(0);
    }
    describe_counter!(
        ORDER_LIFE,
        "Order-life events: paid, late_payment, cancelled, given_back."
    );
    for event in LIFE_EVENTS {
        counter!(ORDER_LIFE, "event" => event).increment(0);
    }
    describe_histogram!(
        REAPER_LAG,
        metrics::Unit::Seconds,
        "How long after its due time a hold was expired."
    );
    describe_histogram!(
        GROUP_SIZE,
        metrics::Unit::Count,
        "Buyers sold in one group-commit step."
    );
    describe_histogram!(
        GROUP_WAIT,
        metrics::Unit::Seconds,
        "Time a buyer waited for its group to start."
    );
}

/// Every outcome a buy that ran its strategy is counted under
/// ([`BuyMetrics::record`]'s).
pub const BUY_OUTCOMES: [&str; 5] = ["sold", "sold_out", "limit_reached", "busy", "error"];

/// One strategy's buy metrics, resolved once when its product is listed:
/// `counter!` with labels known only at run time builds and hashes a key
/// and looks it up in the recorder's registry on every call, which the
/// hot path pays per sale; a handle is an `Arc` to the series itself.
#[derive(Clone)]
pub struct BuyMetrics {
    outcomes: [Counter; BUY_OUTCOMES.len()],
    duration: Histogram,
}

impl BuyMetrics {
    /// The handles of `strategy`'s series.
    pub fn of(strategy: &'static str) -> Self {
        Self {
            outcomes: BUY_OUTCOMES
                .map(|outcome| counter!(BUYS, "strategy" => strategy, "outcome" => outcome)),
            duration: histogram!(BUY_DURATION, "strategy" => strategy),
        }
    }

    /// One buy's outcome (one of [`BUY_OUTCOMES`]; anything else counts
    /// as `error`), reached `took` after the request arrived.
    pub fn record(&self, outcome: &str, took: Duration) {
        let index = BUY_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(BUY_OUTCOMES.len() - 1);
        self.outcomes[index].increment(1);
        self.duration.record(took.as_secs_f64());
    }
}

/// A `sold_out` answered from the local flag.
pub fn sold_out_flag() {
    counter!(SOLD_OUT_FLAG).increment(1);
}

/// Runs `section` under a lock just acquired by a buy that began at
/// `started`: records how long the buyer waited for the lock and how long
/// it held it.
pub async fn holding<T>(
    strategy: &'static str,
    started: Instant,
    section: impl Future<Output = T>,
) -> T {
    histogram!(LOCK_WAIT, "strategy" => strategy).record(started.elapsed().as_secs_f64());
    let held = Instant::now();
    let out = section.await;
    histogram!(LOCK_HOLD, "strategy" => strategy).record(held.elapsed().as_secs_f64());
    out
}

/// The writer stored a batch of `orders`, the oldest `oldest` old.
pub fn writer_batch(orders: usize, oldest: Duration) {
    histogram!(WRITER_BATCH).record(orders as f64);
    histogram!(WRITER_LAG).record(oldest.as_secs_f64());
}

/// A group of `size` buyers began its step under `strategy`; `waits`
/// are how long each of them queued for it.
pub fn group(strategy: &'static str, size: usize, waits: impl Iterator<Item = Duration>) {
    histogram!(GROUP_SIZE, "strategy" => strategy).record(size as f64);
    let wait = histogram!(GROUP_WAIT, "strategy" => strategy);
    for waited in waits {
        wait.record(waited.as_secs_f64());
    }
}

/// A request turned away by the instance's edge, for one of
/// [`REJECT_REASONS`].
pub fn rejected(reason: &'static str) {
    counter!(REJECTED, "reason" => reason).increment(1);
}

/// `n` order-life events of kind `event` (one of [`LIFE_EVENTS`]).
pub fn order_life(event: &'static str, n: u64) {
    counter!(ORDER_LIFE, "event" => event).increment(n);
}

/// A hold expired by a reaper `lag` after its due time.
pub fn reaper_lag(lag: Duration) {
    histogram!(REAPER_LAG).record(lag.as_secs_f64());
}

/// One backend path's guard series, resolved when the path is first
/// bought on (see [`BuyMetrics`] for why handles).
pub struct GuardMetrics {
    limit: Gauge,
    in_flight: Gauge,
    breaker: Gauge,
    shed_by_limit: Counter,
    shed_by_breaker: Counter,
}

impl GuardMetrics {
    /// The handles of `path`'s series.
    pub fn of(path: &str) -> Self {
        let path = path.to_owned();
        Self {
            limit: gauge!(ADAPTIVE_LIMIT, "path" => path.clone()),
            in_flight: gauge!(PATH_IN_FLIGHT, "path" => path.clone()),
            breaker: gauge!(BREAKER_STATE, "path" => path.clone()),
            shed_by_limit: counter!(SHED, "path" => path.clone(), "by" => "limit"),
            shed_by_breaker: counter!(SHED, "path" => path, "by" => "breaker"),
        }
    }

    /// The limit and what is in flight, with the limit on.
    pub fn limit(&self, now: Option<(usize, usize)>) {
        if let Some((limit, in_flight)) = now {
            self.limit.set(limit as f64);
            self.in_flight.set(in_flight as f64);
        }
    }

    /// The breaker's state, as its gauge's number (0 closed, 1 open, 2
    /// half-open).
    pub fn breaker(&self, state: f64) {
        self.breaker.set(state);
    }

    /// A buy refused by the limit.
    pub fn shed_by_limit(&self) {
        self.shed_by_limit.increment(1);
    }

    /// A buy refused by the open breaker.
    pub fn shed_by_breaker(&self) {
        self.shed_by_breaker.increment(1);
    }
}
