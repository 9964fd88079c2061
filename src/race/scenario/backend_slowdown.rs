//! `backend-slowdown`: mid-race, the link from an instance to the backend
//! holding the stock slows down (the lab's proxy, [`Mode::Delay`]), then
//! heals. Buyers are people: each waits at most [`PATIENCE`] and hangs up;
//! a sale that still happens after that is work nobody sees. The same
//! race runs twice on one lab, on two instances that differ only in their
//! guards: `instance-a` with the adaptive limit and the breaker
//! (`sale::guard`), `instance-b` with both off (`SECKILL_EDGE_OFF`).
//!
//! The expectation, from the mechanism. A path's capacity is what it
//! completes per second when saturated, measured here as the sales the
//! backend made per second in the steady part of the slowdown, the more
//! of the two runs. [`BUYERS`] buyers keep a request each in flight, more
//! than the slowed capacity answers within the patience (Little's law:
//! `BUYERS / capacity` > `PATIENCE`):
//! - off, every request waits in the queue (the pool's, the lock's) for
//!   about `BUYERS / capacity`: most answers come after the buyer hung
//!   up, goodput (sales answered within the patience) falls towards 0
//!   while the backend stays busy selling to nobody;
//! - on, the first answer later than the target cuts the path's limit to
//!   `rate × target`; the excess is answered `busy` at once, and what is
//!   admitted waits about the target: goodput ≈ capacity, p99 within the
//!   patience. The requests in flight when the slowdown began were
//!   admitted under the healthy limit and are late either way: the first
//!   [`SETTLE`] of the slowdown is the transition, counted apart.
//! - `redis-lua` is the control: its sale is one script on the instance's
//!   one pipelined Redis connection, so a slower link adds the delay to
//!   each answer and takes nothing from the throughput; nothing piles up
//!   and the limit, whose target is above the slowed latency, must not
//!   cut.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::slowdown_tally::{Counted, Phases, SlowdownOutcome, tally};
use super::{Ctx, ScenarioRow, judge, met};
use crate::judge::check::history::Op;
use crate::lab::client::{Answer, Gateway};
use crate::lab::links::Backend;
use crate::lab::proxy::Mode;
use crate::lab::{Lab, LabArgs};
use crate::model::info::{Expect, Scenario};
use crate::model::product::Settings;
use crate::race::attempt::Attempt;
use crate::race::driver::{reset, settled_row};

/// How long a buyer waits for an answer before hanging up.
pub const PATIENCE: Duration = Duration::from_secs(2);
/// Buyers with a request in flight at once, each request a new buyer.
pub const BUYERS: usize = 400;
/// Before the slowdown.
const HEALTHY: Duration = Duration::from_millis(1_200);
/// The slowdown.
const SLOWED: Duration = Duration::from_secs(10);
/// Its first part, the transition: what was in flight when it began
/// drains at the slowed capacity, `BUYERS / capacity` (about 4 s at the
/// 100 sales per second measured for `db-atomic`), answered after its
/// buyers hung up (hyper reads nothing more from a connection while its
/// request is served, so a hang-up is not noticed and the sale runs on).
pub const SETTLE: Duration = Duration::from_secs(5);
/// After it.
const HEALED: Duration = Duration::from_secs(2);
/// A buyer told `busy` (or any 5xx) waits this long, as `Retry-After`
/// says, before the next buyer takes its place.
const PAUSE: Duration = Duration::from_secs(1);
/// How long the ledger stands still before the race is judged.
const STILL: Duration = Duration::from_secs(1);
/// The longest a hung-up buyer's sale may run on after the race.
const STILL_MAX: Duration = Duration::from_secs(30);
/// Units on sale: more than any run sells.
const STOCK: i64 = 1_000_000;
/// Each instance's PostgreSQL pool in this lab: the slowed path's
/// capacity is the pool over the round trip.
const PG_POOL: u32 = 16;
/// At least this share of the capacity answered within the patience,
/// with the guards on.
pub const GOODPUT_MIN: f64 = 0.8;

/// The paths raced: the strategy, the backend whose link slows, and by
/// how much each way. A Redis lock's sale crosses its link six times
/// while it holds the lock, so 2 ms each way already slows it fivefold.
const PATHS: [(&str, Backend, Duration); 3] = [
    ("db-atomic", Backend::Postgres, Duration::from_millis(40)),
    ("redis-lua", Backend::Redis, Duration::from_millis(40)),
    ("redis-lock", Backend::Redis, Duration::from_millis(2)),
];

/// The instances: guards on, guards off.
const INSTANCES: [(&str, bool); 2] = [("instance-a", true), ("instance-b", false)];

/// Races every path through both instances, one after the other.
pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        proxied: true,
        instance_env: vec![("SECKILL_PG_POOL".to_owned(), PG_POOL.to_string())],
        instance_env_of: vec![(
            "instance-b".to_owned(),
            "SECKILL_EDGE_OFF".to_owned(),
            "adaptive,breaker".to_owned(),
        )],
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let mut rows = Vec::new();
        for (strategy, backend, delay) in PATHS {
            let mut pair = Vec::new();
            for (index, (instance, guarded)) in INSTANCES.into_iter().enumerate() {
                let gateway = |i: usize| {
                    Gateway::new(&lab.info.instances[i].url, &lab.info.admin_token, BUYERS)
                };
                // The other instance reads the counter: its link is fast.
                let (target, observer) = (gateway(index)?, gateway(1 - index)?);
                let slowdown = Slowdown {
                    instance,
                    backend,
                    delay,
                };
                let gateways = (&target, &observer);
                pair.push(slowed_race(ctx, lab, gateways, strategy, slowdown, guarded).await?);
            }
            rows.extend(judged(pair, delay));
        }
        Ok(rows)
    })
    .await
}

/// Which link slows, and by how much.
#[derive(Clone, Copy)]
struct Slowdown {
    instance: &'static str,
    backend: Backend,
    delay: Duration,
}

/// One race through `target`, the link slowed in its middle; `observer`
/// (another instance) reads the stock counter.
async fn slowed_race(
    ctx: &mut Ctx,
    lab: &Lab,
    (target, observer): (&Gateway, &Gateway),
    strategy: &str,
    slowdown: Slowdown,
    guarded: bool,
) -> anyhow::Result<(ScenarioRow, SlowdownOutcome)> {
    let product = ctx.product();
    reset(target, product, strategy, STOCK, Settings::default()).await?;
    eprintln!(
        "  {strategy}, guards {}: {:?} more each way on {} from {}",
        if guarded { "on" } else { "off" },
        slowdown.delay,
        slowdown.backend.name(),
        slowdown.instance
    );
    let start = Instant::now();
    let phases = Phases::from(start, HEALTHY, SLOWED, SETTLE, HEALED);
    let load = tokio::spawn(buyers(target.clone(), product, phases.end));
    tokio::time::sleep_until(phases.slowed.into()).await;
    lab.partition(
        slowdown.instance,
        slowdown.backend,
        Mode::Delay(slowdown.delay),
    )?;
    tokio::time::sleep_until(phases.steady.into()).await;
    let steady = counted(observer, product).await?;
    tokio::time::sleep_until(phases.healed.into()).await;
    let sales = steady.rate_to(counted(observer, product).await?);
    let limit = settled_limit(target, strategy).await;
    lab.partition(slowdown.instance, slowdown.backend, Mode::Pass)?;
    let attempts = load.await?;
    still(target, product).await?;
    let row = settled_row(target, &ctx.audit, product, &attempts, start).await?;
    let buyers = buyers_of(ctx, product).await?;
    let mut outcome = tally(&attempts, &buyers, &phases, PATIENCE, guarded, sales);
    outcome.limit = limit;
    // Judged again by `judged`, once both runs of the path are in.
    let scenario_row = judge(row, Scenario::BackendSlowdown, "", Expect::NoOversell);
    Ok((scenario_row, outcome))
}

/// Waits until the instance has stopped selling `product`. A buyer who
/// hung up left its request running there (see [`SETTLE`]), and with the
/// stock outlasting the race every such request ends in a sale, at the
/// healed path's hundreds per second: a ledger that stands still for
/// [`STILL`] has none left. Judged earlier, the ledger and the history
/// are read on either side of a late sale and disagree by it.
async fn still(target: &Gateway, product: i64) -> anyhow::Result<()> {
    let began = Instant::now();
    let mut last = None;
    loop {
        let ledger = target.ledger(product).await?;
        let now = (ledger.sold, ledger.remaining, ledger.pending);
        if last == Some(now) {
            return Ok(());
        }
        anyhow::ensure!(
            began.elapsed() < STILL_MAX,
            "product {product} was still selling {STILL_MAX:?} after its buyers stopped"
        );
        last = Some(now);
        tokio::time::sleep(STILL).await;
    }
}

/// The adaptive limit of `strategy`'s path (its one store here), as the
/// instance's `/config` tells it at the end of the slowdown; `None` with
/// the limit off (or no answer).
async fn settled_limit(target: &Gateway, strategy: &str) -> Option<u64> {
    let config = target.config().await.ok()?;
    let prefix = format!("{strategy}@");
    config["paths"]
        .as_array()?
        .iter()
        .find(|p| p["path"].as_str().is_some_and(|p| p.starts_with(&prefix)))?["limit"]
        .as_u64()
}

/// `product`'s stock counter now, as `observer` reads it.
async fn counted(observer: &Gateway, product: i64) -> anyhow::Result<Counted> {
    let sent = Instant::now();
    let remaining = observer.ledger(product).await?.remaining;
    Ok(Counted {
        at: sent + sent.elapsed() / 2,
        remaining,
    })
}

/// The buyer of every order of `product`.
async fn buyers_of(ctx: &Ctx, product: i64) -> anyhow::Result<Vec<String>> {
    let dbs = ctx.audit.dbs.as_ref().ok_or_else(|| {
        anyhow::anyhow!("backend-slowdown counts sales in PostgreSQL, which this race cannot reach")
    })?;
    Ok(
        sqlx::query_scalar("SELECT user_id FROM orders WHERE product_id = $1")
            .bind(product)
            .fetch_all(&dbs.pg)
            .await?,
    )
}

/// [`BUYERS`] buyers until `end`, each request a new buyer who hangs up
/// after [`PATIENCE`] (no answer: an unknown outcome to them).
async fn buyers(target: Gateway, product: i64, end: Instant) -> Vec<Attempt> {
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..BUYERS)
        .map(|_| {
            let (target, next) = (target.clone(), next.clone());
            tokio::spawn(async move {
                let mut mine = Vec::new();
                while Instant::now() < end {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    let buyer = format!("patient-{product}-{seq}");
                    let attempt = patient(&target, product, buyer).await;
                    let refused = attempt.answer.status >= 500;
                    mine.push(attempt);
                    if refused {
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                mine
            })
        })
        .collect();
    let mut attempts = Vec::new();
    for worker in workers {
        attempts.extend(worker.await.unwrap_or_default());
    }
    attempts
}

/// One buy that waits at most [`PATIENCE`]: past it the buyer hangs up
/// (the connection is dropped) and never learns the outcome.
async fn patient(target: &Gateway, product: i64, buyer: String) -> Attempt {
    let sent = Instant::now();
    match tokio::time::timeout(PATIENCE, Attempt::make(target, product, &buyer)).await {
        Ok(attempt) => attempt,
        Err(_) => Attempt {
            op: Op::Buy,
            buyer,
            sent,
            took: sent.elapsed(),
            answer: Answer::unanswered(),
            units: None,
        },
    }
}

/// The two rows of a path, judged against the capacity both measured.
fn judged(pair: Vec<(ScenarioRow, SlowdownOutcome)>, delay: Duration) -> Vec<ScenarioRow> {
    let capacity = pair.iter().map(|(_, o)| o.sales).fold(0.0, f64::max);
    pair.into_iter()
        .map(|(mut row, mut outcome)| {
            outcome.capacity = capacity;
            let honest = met(Expect::NoOversell, &row.row);
            let held = outcome.goodput >= GOODPUT_MIN * capacity
                && outcome.p99_ms < PATIENCE.as_millis() as f64;
            (row.met, row.expected) = if outcome.guarded {
                (honest && held, expected_on())
            } else {
                (
                    honest,
                    "oversold = 0, 200s = orders (the comparison)".to_owned(),
                )
            };
            row.variant = format!(
                "{}, +{}ms each way",
                if outcome.guarded {
                    "guards on"
                } else {
                    "guards off"
                },
                delay.as_millis()
            );
            row.slowdown = Some(outcome);
            row
        })
        .collect()
}

fn expected_on() -> String {
    format!(
        "goodput >= {:.0}% of capacity, p99 < {} ms; oversold = 0, 200s = orders",
        GOODPUT_MIN * 100.0,
        PATIENCE.as_millis()
    )
}
