//! One race: reset a product, fire the buyers, wait for the order writer,
//! read the ledger, and turn it all into a [`Row`].

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::client::{BuyResult, Target};
use crate::ledger::Ledger;
use crate::product::{ResetRequest, Settings};

/// One race's settings.
#[derive(Debug, Clone)]
pub struct RaceSpec {
    /// Product id used for this race (reset first).
    pub product_id: i64,
    /// Strategy id.
    pub strategy: String,
    /// Units on sale.
    pub stock: i64,
    /// Number of buy requests, each from a distinct buyer.
    pub buyers: usize,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// When set, buyer `i` starts no earlier than `i × pace` after the
    /// first: arrivals spread over time instead of one burst, so a race
    /// that needs a buyer to arrive after a lease expired gets one.
    pub pace: Option<Duration>,
    /// Strategy settings sent with the reset (`work_ms`, `lease_ms`, …).
    pub settings: Settings,
}

/// One line of the comparison, as `seckill race --json` writes it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Strategy id.
    pub strategy: String,
    /// Stock at the reset.
    pub initial: i64,
    /// Orders recorded (the ledger).
    pub sold: i64,
    /// 200s the clients saw.
    pub client_ok: i64,
    /// `max(0, sold - initial)`.
    pub oversold: i64,
    /// Decrements that vanished.
    pub lost_updates: i64,
    /// The strategy's stock counter at the end.
    pub remaining: i64,
    /// Requests per second over the whole race.
    pub rps: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
    /// Non-200 outcomes by error code.
    pub errors: BTreeMap<String, u64>,
}

/// How long the order writer may take to drain after a race.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one race against `target` and returns its row.
pub async fn race(target: &Target, spec: &RaceSpec) -> anyhow::Result<Row> {
    reset(
        target,
        spec.product_id,
        &spec.strategy,
        spec.stock,
        spec.settings,
    )
    .await?;
    let prefix = format!("race-{:08x}", rand::random::<u32>());
    let started = Instant::now();
    let outcomes = fire(
        target,
        spec.product_id,
        &prefix,
        spec.buyers,
        spec.concurrency,
        spec.pace,
    )
    .await;
    let elapsed = started.elapsed();
    let ledger = drained_ledger(target, spec.product_id).await?;
    Ok(summarize(&spec.strategy, &ledger, &outcomes, elapsed))
}

/// Resets `product` to `stock` units under `strategy` with `settings`.
pub async fn reset(
    target: &Target,
    product: i64,
    strategy: &str,
    stock: i64,
    settings: Settings,
) -> anyhow::Result<()> {
    let request = ResetRequest {
        stock,
        strategy: strategy.to_owned(),
        settings,
    };
    target.reset(product, &request).await?;
    Ok(())
}

/// What one buyer got, and how long it took.
pub type Timed = (BuyResult, Duration);

/// Fires `buyers` buys at `product`, each from a distinct buyer
/// `{prefix}-{i}`, `concurrency` in flight at once; with `pace`, buyer `i`
/// starts no earlier than `i × pace` after the first. Shows a progress
/// counter when stderr is a terminal.
pub async fn fire(
    target: &Target,
    product: i64,
    prefix: &str,
    buyers: usize,
    concurrency: usize,
    pace: Option<Duration>,
) -> Vec<Timed> {
    let done = Arc::new(AtomicUsize::new(0));
    let progress = show_progress(prefix, buyers, done.clone());
    let started = Instant::now();
    let outcomes = futures::stream::iter(0..buyers)
        .map(|i| {
            let user = format!("{prefix}-{i}");
            let done = done.clone();
            let start_at = pace.map(|pace| started + pace * i as u32);
            async move {
                if let Some(at) = start_at {
                    tokio::time::sleep_until(at.into()).await;
                }
                let sent = Instant::now();
                let result = target.buy(product, &user).await;
                done.fetch_add(1, Ordering::Relaxed);
                (result, sent.elapsed())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    if let Some(handle) = progress {
        handle.abort();
        eprint!("\r\x1b[2K");
    }
    outcomes
}

/// Polls the ledger until no order of the product is left in the stream.
pub async fn drained_ledger(target: &Target, id: i64) -> anyhow::Result<Ledger> {
    let started = Instant::now();
    loop {
        let ledger = target.ledger(id).await?;
        if ledger.pending == 0 {
            return Ok(ledger);
        }
        anyhow::ensure!(
            started.elapsed() < DRAIN_TIMEOUT,
            "the order writer left {} orders of product {id} in the stream for {DRAIN_TIMEOUT:?}",
            ledger.pending
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The row for `strategy` from the drained ledger and what the clients saw.
pub fn summarize(strategy: &str, ledger: &Ledger, outcomes: &[Timed], elapsed: Duration) -> Row {
    let mut errors = BTreeMap::new();
    let mut client_ok = 0;
    for (result, _) in outcomes {
        match result {
            BuyResult::Ok => client_ok += 1,
            BuyResult::Failed(code) => *errors.entry(code.clone()).or_insert(0) += 1,
        }
    }
    let mut latencies: Vec<Duration> = outcomes.iter().map(|(_, d)| *d).collect();
    latencies.sort();
    Row {
        strategy: strategy.to_owned(),
        initial: ledger.initial,
        sold: ledger.sold,
        client_ok,
        oversold: ledger.oversold,
        lost_updates: ledger.lost_updates,
        remaining: ledger.remaining,
        rps: round2(outcomes.len() as f64 / elapsed.as_secs_f64().max(1e-9)),
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
        errors,
    }
}

/// Nearest-rank percentile of sorted latencies, in ms.
fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    round2(sorted[rank - 1].as_secs_f64() * 1000.0)
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A one-line progress counter on stderr, only when it is a terminal.
fn show_progress(
    label: &str,
    total: usize,
    done: Arc<AtomicUsize>,
) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let label = label.to_owned();
    Some(tokio::spawn(async move {
        loop {
            let n = done.load(Ordering::Relaxed);
            eprint!("\r\x1b[2K{label:<16} {n:>7}/{total} buys");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile_ms(&sorted, 0.50), 50.0);
        assert_eq!(percentile_ms(&sorted, 0.99), 99.0);
        assert_eq!(percentile_ms(&[ms(7)], 0.99), 7.0);
        assert_eq!(percentile_ms(&[], 0.5), 0.0);
    }
}
