//! One race: reset a product, fire the buyers, wait for the order writer,
//! read the ledger, and turn it all into a [`Row`].

use std::collections::{BTreeMap, HashMap};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

pub use super::attempt::Attempt;
use super::payer::{LifeOutcome, Payer};
use crate::judge::check;
use crate::judge::check::Verdict;
use crate::judge::check::history;
use crate::judge::check::history::{Completion, Op, RaceHistory};
use crate::lab::client::{BuyResult, Gateway};
use crate::model::product::hold_terms::Giveback;
use crate::model::product::{MAX_WAVES, ResetRequest, Settings, now_ms};
use crate::orders::ledger::Ledger;

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
    /// With `prebooking`: how many of the buyers (the first ones) reserve
    /// before the opening; the others come without a reservation.
    pub reserving: usize,
    /// With holds (`pay_within_ms`): what each holder does with its hold.
    pub payer: Option<Payer>,
}

/// One line of the comparison, as `seckill race --json` writes it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    /// Strategy id.
    pub strategy: String,
    /// Stock at the reset.
    pub initial: i64,
    /// Orders recorded (the ledger): with holds, every hold made, those
    /// given back and sold again included.
    pub sold: i64,
    /// Units the orders keep at the end (the ledger's `kept`): `sold`, or
    /// with holds the held and paid ones. What the stock is measured by.
    #[serde(default)]
    pub kept: i64,
    /// 200s the clients saw.
    pub client_ok: i64,
    /// Units kept past the stock: the ledger's `max(0, kept - initial)`
    /// at the end, or, where the history was checked, the most kept at
    /// one instant past the stock, whichever is more.
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
    /// Requests whose outcome was unknown to the buyer (`outcome_unknown`,
    /// a gateway 502/504, no answer): neither a sale nor a refusal.
    #[serde(default)]
    pub unknown: i64,
    /// The independent history check ([`crate::judge::check`]); `None` when the
    /// race ran without access to PostgreSQL.
    #[serde(default)]
    pub history_ok: Option<bool>,
    /// What the history check found, by rule (only non-zero counts).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub violations: BTreeMap<String, u64>,
    /// Of the unknown outcomes, how many had in fact sold.
    #[serde(default)]
    pub unknown_sold: i64,
    /// With a sale window: the rush at its opening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opening: Option<Opening>,
    /// With holds (`pay_within_ms`): what became of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub life: Option<LifeOutcome>,
}

impl Row {
    /// Whether this race is held to the no-oversell rules: its strategy
    /// is safe and, with holds, its give-back checks the due time (the
    /// naive job oversells by design, under any strategy).
    pub fn expected_safe(&self, safe: &[String]) -> bool {
        let naive = |life: &LifeOutcome| life.giveback == Giveback::NaiveCron.as_str();
        safe.contains(&self.strategy) && !self.life.as_ref().is_some_and(naive)
    }
}

/// Who checks a race's history, and where it is kept: the orders'
/// databases, the history file (appended to), and which strategies are
/// held to the safe rules.
#[derive(Clone, Default)]
pub struct Audit {
    /// The orders' databases; without them nothing is checked.
    pub dbs: Option<check::OrderDbs>,
    /// `--history FILE`.
    pub history: Option<std::path::PathBuf>,
    /// Ids of the strategies that claim never to oversell.
    pub safe: Vec<String>,
}

impl Audit {
    /// An audit of the lab's races against its PostgreSQL (and MySQL,
    /// where a product's orders are there).
    pub fn connect_lazy(
        database_url: &str,
        mysql_url: Option<&str>,
        history: Option<std::path::PathBuf>,
        safe: Vec<String>,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            dbs: Some(check::OrderDbs::connect_lazy(database_url, mysql_url)?),
            history,
            safe,
        })
    }

    /// Writes the race's history (when asked) and checks it (when it can).
    async fn settle(
        &self,
        ledger: &Ledger,
        attempts: &[Attempt],
        began: Instant,
    ) -> anyhow::Result<Option<Verdict>> {
        let settings = &ledger.settings;
        // The naive give-back job oversells by design, whatever sells.
        let naive = settings.pay_within_ms > 0 && !settings.giveback.checks_due();
        let race = RaceHistory {
            race: history::Race {
                product: ledger.id,
                epoch: ledger.epoch,
                strategy: ledger.strategy.clone(),
                safe: self.safe.contains(&ledger.strategy) && !naive,
                // The reset's: the history's restock lines add the rest.
                initial: ledger.initial - ledger.added,
                per_user_limit: ledger.settings.per_user_limit,
                pay_within_ms: ledger.settings.pay_within_ms,
                orders_in: ledger.orders_in,
                began_ms: now_ms().saturating_sub(began.elapsed().as_millis() as u64),
            },
            events: attempts.iter().map(|a| a.event(began)).collect(),
        };
        if let Some(path) = &self.history {
            history::append(path, &race)?;
        }
        match &self.dbs {
            Some(dbs) => Ok(Some(check::check(dbs, &race).await?)),
            None => Ok(None),
        }
    }
}

/// How long the order writer may take to drain after a race.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one race against `target` and returns its row, its history
/// checked by `audit`.
pub async fn race(target: &Gateway, spec: &RaceSpec, audit: &Audit) -> anyhow::Result<Row> {
    reset(
        target,
        spec.product_id,
        &spec.strategy,
        spec.stock,
        spec.settings,
    )
    .await?;
    let prefix = format!("race-{:08x}", rand::random::<u32>());
    let tokens = match spec.settings.prebooking {
        true => reserve_all(target, spec, &prefix).await?,
        false => HashMap::new(),
    };
    // On a product with a hidden path each buyer fetches its path first,
    // as a browser would.
    let buyers = target.clone().with_hidden_paths(spec.settings.hidden_path);
    let started = Instant::now();
    let outcomes = fire_with(
        &buyers,
        spec.product_id,
        &prefix,
        (spec.buyers, spec.concurrency),
        spec.pace,
        &tokens,
        spec.payer.map(|payer| (payer, spec.settings.pay_within_ms)),
    )
    .await;
    let mut row = settled_row(target, audit, spec.product_id, &outcomes, started).await?;
    if let Some(opening) = &mut row.opening {
        opening.reserved = tokens.len() as u64;
    }
    Ok(row)
}

/// The reservations of the first `spec.reserving` buyers, made before the
/// opening, `spec.concurrency` at once: buyer to token.
async fn reserve_all(
    target: &Gateway,
    spec: &RaceSpec,
    prefix: &str,
) -> anyhow::Result<HashMap<String, String>> {
    futures::stream::iter(0..spec.reserving.min(spec.buyers))
        .map(|i| async move {
            let user = format!("{prefix}-{i}");
            let token = target.reserve(spec.product_id, &user).await?;
            Ok::<_, anyhow::Error>((user, token))
        })
        .buffer_unordered(spec.concurrency.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

/// The row of a race whose buys are over: waits for the order writer,
/// reads the ledger, writes and checks the history.
pub async fn settled_row(
    target: &Gateway,
    audit: &Audit,
    product: i64,
    attempts: &[Attempt],
    began: Instant,
) -> anyhow::Result<Row> {
    let elapsed = began.elapsed();
    let ledger = settled_ledger(target, product).await?;
    let mut row = summarize(&ledger, attempts, elapsed);
    if let Some(verdict) = audit.settle(&ledger, attempts, began).await? {
        row.history_ok = Some(verdict.history_ok);
        row.violations = verdict.violations;
        row.unknown_sold = verdict.unknown_sold as i64;
        // The ledger counts what is kept at the end; the history sees the
        // instant more were kept than the stock (a naive give-back's late
        // payment), whatever the strategy claims.
        let at_peak = verdict.peak_kept as i64 - (ledger.initial - ledger.added);
        row.oversold = row.oversold.max(at_peak);
    }
    Ok(row)
}

/// Resets `product` to `stock` units under `strategy` with `settings`.
pub async fn reset(
    target: &Gateway,
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

/// Fires `buyers` buys at `product`, each from a distinct buyer
/// `{prefix}-{i}`, `concurrency` in flight at once; with `pace`, buyer `i`
/// starts no earlier than `i × pace` after the first. Shows a progress
/// counter when stderr is a terminal.
pub async fn fire(
    target: &Gateway,
    product: i64,
    prefix: &str,
    buyers: usize,
    concurrency: usize,
    pace: Option<Duration>,
) -> Vec<Attempt> {
    let none = HashMap::new();
    let spread = (buyers, concurrency);
    fire_with(target, product, prefix, spread, pace, &none, None).await
}

/// [`fire`], each buyer carrying its reservation from `tokens` if it has
/// one; with `payer` (and the product's `pay_within_ms`), each holder
/// then follows it, outside the `concurrency` buys in flight, and its
/// steps come after the buys.
async fn fire_with(
    target: &Gateway,
    product: i64,
    prefix: &str,
    (buyers, concurrency): (usize, usize),
    pace: Option<Duration>,
    tokens: &HashMap<String, String>,
    payer: Option<(Payer, u64)>,
) -> Vec<Attempt> {
    let done = Arc::new(AtomicUsize::new(0));
    let progress = show_progress(prefix, buyers, done.clone());
    let started = Instant::now();
    let mut outcomes = futures::stream::iter(0..buyers)
        .map(|i| {
            let user = format!("{prefix}-{i}");
            let done = done.clone();
            let start_at = pace.map(|pace| started + pace * i as u32);
            async move {
                if let Some(at) = start_at {
                    tokio::time::sleep_until(at.into()).await;
                }
                let token = tokens.get(&user).map(String::as_str);
                let attempts = buy_when_open(target, product, &user, token).await;
                done.fetch_add(1, Ordering::Relaxed);
                let hold = attempts
                    .last()
                    .and_then(|a| a.answer.order_id.filter(|_| a.answer.status == 200));
                let follow = payer.zip(hold).map(|((payer, within), order)| {
                    tokio::spawn(payer.follow(target.clone(), (order, user), within))
                });
                (attempts, follow)
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    let mut steps = Vec::new();
    for follow in outcomes.iter_mut().filter_map(|(_, follow)| follow.take()) {
        steps.extend(follow.await.unwrap_or_default());
    }
    let outcomes: Vec<Attempt> = outcomes
        .into_iter()
        .flat_map(|(attempts, _)| attempts)
        .chain(steps)
        .collect();
    if let Some(handle) = progress {
        handle.abort();
        eprint!("\r\x1b[2K");
    }
    outcomes
}

/// How often one buyer comes back to a sale that has not opened.
const OPENING_TRIES: usize = 3;

/// One buyer's buy, as a person at a flash sale makes it: told
/// `not_started`, or `sold_out` until the next wave, the buyer waits for
/// the moment the answer names and asks again (at most [`OPENING_TRIES`]
/// times, and once per wave). Every request is an attempt of the race's
/// history.
async fn buy_when_open(
    target: &Gateway,
    product: i64,
    user: &str,
    reservation: Option<&str>,
) -> Vec<Attempt> {
    let most = OPENING_TRIES + MAX_WAVES as usize;
    let mut attempts = Vec::new();
    loop {
        let attempt = Attempt::make_with(target, product, user, reservation).await;
        let code = attempt.answer.code.as_deref();
        let opens_at = attempt
            .answer
            .opens_at_ms
            .filter(|_| matches!(code, Some("not_started" | "sold_out")));
        attempts.push(attempt);
        match opens_at {
            Some(at) if attempts.len() < most => {
                tokio::time::sleep(Duration::from_millis(at.saturating_sub(now_ms()))).await;
            }
            _ => return attempts,
        }
    }
}

/// How long a race's row waits for the give-backs in flight to land.
const GIVEBACK_WAIT: Duration = Duration::from_secs(5);

/// The drained ledger ([`drained_ledger`]) once the give-backs in flight
/// have landed: with holds, a buyer may see its hold expired before its
/// unit is back on sale, and a row read in between would count that unit
/// stranded. A unit still not back after [`GIVEBACK_WAIT`] is reported
/// stranded.
async fn settled_ledger(target: &Gateway, id: i64) -> anyhow::Result<Ledger> {
    let started = Instant::now();
    loop {
        let ledger = drained_ledger(target, id).await?;
        let holds = ledger.settings.pay_within_ms > 0;
        if !holds || ledger.stranded == 0 || started.elapsed() >= GIVEBACK_WAIT {
            return Ok(ledger);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls the ledger until no order of the product is left in the stream.
/// A ledger that cannot be read (a backend just restarted, its pooled
/// connections not yet replaced) is asked again until the same deadline.
pub async fn drained_ledger(target: &Gateway, id: i64) -> anyhow::Result<Ledger> {
    let started = Instant::now();
    loop {
        match target.ledger(id).await {
            Ok(ledger) if ledger.pending == 0 => return Ok(ledger),
            Ok(ledger) => anyhow::ensure!(
                started.elapsed() < DRAIN_TIMEOUT,
                "the order writer left {} orders of product {id} in the stream for {DRAIN_TIMEOUT:?}",
                ledger.pending
            ),
            Err(error) if started.elapsed() >= DRAIN_TIMEOUT => return Err(error),
            Err(error) => tracing::debug!(%error, "ledger not readable yet"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The row from the drained ledger and what the clients saw.
fn summarize(ledger: &Ledger, attempts: &[Attempt], elapsed: Duration) -> Row {
    let mut row = answered(&ledger.strategy, attempts, elapsed);
    row.initial = ledger.initial;
    row.sold = ledger.sold;
    row.kept = ledger.kept;
    row.oversold = ledger.oversold;
    row.lost_updates = ledger.lost_updates;
    row.remaining = ledger.remaining;
    row.opening = (ledger.settings.opens_at_ms > 0).then(|| Opening::of(ledger, attempts));
    let settings = &ledger.settings;
    row.life =
        (settings.pay_within_ms > 0).then(|| LifeOutcome::of(ledger, settings.giveback, attempts));
    row
}

/// The client's side of a row: what the buyers were told, and how fast.
fn answered(strategy: &str, attempts: &[Attempt], elapsed: Duration) -> Row {
    let mut errors = BTreeMap::new();
    let mut client_ok = 0;
    let mut unknown = 0;
    let attempts: Vec<&Attempt> = attempts.iter().filter(|a| a.op == Op::Buy).collect();
    for attempt in &attempts {
        let answer = &attempt.answer;
        if Completion::of(answer.status, answer.code.as_deref()) == Completion::Info {
            unknown += 1;
        }
        match answer.result() {
            BuyResult::Ok => client_ok += 1,
            BuyResult::Failed(code) => *errors.entry(code).or_insert(0) += 1,
        }
    }
    let mut latencies: Vec<Duration> = attempts.iter().map(|a| a.took).collect();
    latencies.sort();
    Row {
        strategy: strategy.to_owned(),
        client_ok,
        rps: round2(attempts.len() as f64 / elapsed.as_secs_f64().max(1e-9)),
        p50_ms: percentile_ms(&latencies, 0.50),
        p99_ms: percentile_ms(&latencies, 0.99),
        errors,
        unknown,
        ..Row::default()
    }
}

/// The row of a product its stores no longer know (they came back from
/// a crash without it): nothing of it is recorded any more, so every
/// 200 a buyer saw is a sale lost (`ok_without_order`), and the product
/// itself (`product_lost`).
pub fn vanished_row(strategy: &str, initial: i64, attempts: &[Attempt], began: Instant) -> Row {
    let mut row = answered(strategy, attempts, began.elapsed());
    row.initial = initial;
    row.history_ok = Some(false);
    row.violations = BTreeMap::from([
        ("ok_without_order".to_owned(), row.client_ok as u64),
        ("product_lost".to_owned(), 1),
    ]);
    row
}

/// The rush at a sale's opening: how many were there before it, and how
/// long after it the last unit went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opening {
    /// Requests answered `not_started`.
    pub early: u64,
    /// Buyers who reserved before the opening (pre-booking).
    #[serde(default)]
    pub reserved: u64,
    /// From the opening to the answer of the last sale, in ms (none when
    /// nothing sold).
    pub last_sale_ms: Option<f64>,
    /// Sales answered before the opening, by this process's clock: a
    /// window judged by a clock that is ahead.
    #[serde(default)]
    pub sold_early: u64,
}

impl Opening {
    fn of(ledger: &Ledger, attempts: &[Attempt]) -> Self {
        let early = attempts
            .iter()
            .filter(|a| a.answer.code.as_deref() == Some("not_started"))
            .count() as u64;
        // The opening on this process's monotonic clock.
        let since = Duration::from_millis(now_ms().saturating_sub(ledger.settings.opens_at_ms));
        let opened = Instant::now().checked_sub(since);
        let sales = || attempts.iter().filter(|a| a.answer.status == 200);
        let last_sale_ms = sales()
            .filter_map(|a| (a.sent + a.took).checked_duration_since(opened?))
            .max()
            .map(|d| round2(d.as_secs_f64() * 1000.0));
        let sold_early = match opened {
            Some(opened) => sales().filter(|a| a.sent + a.took < opened).count() as u64,
            // The opening is further back than this process's clock
            // reaches: every sale came after it.
            None => 0,
        };
        Self {
            early,
            reserved: 0,
            last_sale_ms,
            sold_early,
        }
    }
}

/// Nearest-rank percentile of sorted latencies, in ms (two decimals).
pub fn percentile_ms(sorted: &[Duration], q: f64) -> f64 {
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
