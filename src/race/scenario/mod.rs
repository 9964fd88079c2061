//! Named scenarios: `seckill race --scenario NAME` sets up the topology,
//! the settings and the fault, races the strategies the scenario concerns,
//! and checks each row against the outcome the classic articles predict.
//!
//! Which strategies a scenario races, and what it expects of each, come
//! from the catalogue ([`crate::model::info::Info::under`]): a new strategy that
//! declares a hazard is raced by its scenario without touching it.

mod abandoned_carts;
mod backend_slowdown;
mod clock_skew;
mod cluster_failover;
mod cluster_holders;
mod cluster_spread;
mod cluster_victim;
mod contention;
mod frozen_holder;
mod holder_crash;
mod holds;
mod instance_kill;
mod late_payment;
mod lease_expiry;
mod local_lock;
mod partition;
mod pause_resume;
mod pg_restart;
mod power_cut;
mod rate_limit;
mod reaper_crash;
mod redis_crash;
mod redis_failover;
mod redlock_minority;
mod repeatable_read;
mod restock;
mod segment_scaling;
mod slow_disk;
pub mod slowdown_tally;

pub use backend_slowdown::{GOODPUT_MIN, PATIENCE};
pub use cluster_spread::{HOT_MIN, MasterLoad, SPREAD_MAX};
pub use partition::{LOCK_AND_STORE, LOCK_ONLY};
pub use restock::{ADDED, RESET_STOCK};
pub use segment_scaling::MIN_SPEEDUP;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

use super::driver::{Attempt, Audit, RaceSpec, Row, race, reset, settled_row};
use crate::lab::client::Gateway;
use crate::lab::{Lab, LabArgs};
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::{Settings, StoreKind};
use crate::stock::strategy::Catalogue;

/// One row of a scenario: the race's row plus what was expected of it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioRow {
    /// The race's numbers (the foundation's row keys).
    #[serde(flatten)]
    pub row: Row,
    /// The scenario's name.
    pub scenario: String,
    /// What differs between rows of one scenario (`instances=1`,
    /// `segments=4`, `quorum=all`), or empty.
    pub variant: String,
    /// The outcome the scenario predicts, in words.
    pub expected: String,
    /// Whether it happened.
    pub met: bool,
    /// On a Redis Cluster: what each master served during the race.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masters: Vec<MasterLoad>,
    /// `power-cut`'s rows: how every server came back from the cut, and
    /// how long after it this product sold again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut: Option<power_cut::CutOutcome>,
    /// After a fault that loses writes: what reconciliation found and
    /// repaired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled: Option<crate::orders::life::reconcile::Drift>,
    /// `backend-slowdown`'s rows: goodput within the buyers' patience
    /// against the slowed path's capacity, and the rest of its numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowdown: Option<slowdown_tally::SlowdownOutcome>,
    /// `pause-resume`'s rows: what the buyers of each stretch of the
    /// window were told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<pause_resume::Phases>,
}

/// Whether `row` shows what `expect` predicts (and is honest: every 200 a
/// client saw is one recorded order).
pub fn met(expect: Expect, row: &Row) -> bool {
    let count = |code: &str| row.errors.get(code).copied().unwrap_or(0);
    // Every 200 a client saw is one recorded order, every order a 200 or
    // an unknown outcome, and the independent history check agrees (an
    // expected oversell breaks only the safe strategies' rules).
    let honest = row.client_ok + row.unknown_sold == row.sold
        && crate::judge::check::truthful(&row.violations);
    honest
        && match expect {
            Expect::Oversells => row.oversold > 0,
            Expect::NoOversell => row.oversold == 0,
            Expect::SellsAll => row.oversold == 0 && row.sold == row.initial,
            Expect::Stalls => row.sold == 0 && count("busy") > 0,
            Expect::Throttled => {
                let refused: u64 = row.errors.values().sum();
                let expected = count(GATEWAY_429) + count(SERVICE_429) + count("sold_out");
                row.oversold == 0
                    && row.sold > 0
                    && count(GATEWAY_429) > 0
                    && count(SERVICE_429) > 0
                    && refused == expected
            }
            Expect::OpensOnTime => row.opening.as_ref().is_some_and(|opening| {
                opening.sold_early == 0
                    && opening.early > 0
                    && row.sold == row.initial
                    && row.oversold == 0
            }),
        }
}

/// How the driver counts a 429 from nginx.
const GATEWAY_429: &str = "rate_limited:gateway";
/// How the driver counts a 429 from an instance.
const SERVICE_429: &str = "rate_limited:service";

/// The knobs shared by all scenarios (from `seckill race`'s flags).
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Units on sale in the contention-style races.
    pub stock: i64,
    /// Buyers in those races.
    pub buyers: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// Simulated work in the contention race.
    pub work_ms: u64,
    /// Where every race's history is appended (`--history`).
    pub history: Option<std::path::PathBuf>,
    /// `--redis-cluster`: the masters of the cluster `contention` runs on.
    pub redis_cluster: Option<usize>,
}

/// What a scenario works with: its knobs, the catalogue, a product-id
/// allocator, the labs it starts and the audit of the current lab's races.
pub struct Ctx {
    knobs: Knobs,
    catalogue: Catalogue,
    next_product: i64,
    audit: Audit,
}

impl Ctx {
    fn product(&mut self) -> i64 {
        self.next_product += 1;
        self.next_product
    }

    /// Every safe strategy whose stock lives in Redis: what the scenarios
    /// that fault the Redis holding the stock race.
    fn safe_in_redis(&self) -> Vec<&'static str> {
        self.catalogue
            .all()
            .map(|s| s.info())
            .filter(|info| info.safe && info.store == StoreKind::Redis)
            .map(|info| info.id)
            .collect()
    }

    /// The strategies the catalogue races under `hazard`, with what each
    /// is expected to do there.
    fn under(&self, hazard: Hazard) -> Vec<(&'static str, Expect)> {
        self.catalogue
            .all()
            .filter_map(|s| Some((s.info().id, s.info().expect(hazard)?)))
            .collect()
    }

    /// Starts a lab, runs `body` against it and stops the lab, whatever
    /// `body` returned.
    async fn with_lab<T>(
        &mut self,
        topology: LabArgs,
        body: impl AsyncFnOnce(&mut Self, &mut Lab) -> anyhow::Result<T>,
    ) -> anyhow::Result<T> {
        let mut lab = Lab::start(&topology).await?;
        eprintln!("watch it live: {}/", lab.info.gateway_url);
        let safe = self
            .catalogue
            .all()
            .filter(|s| s.info().safe)
            .map(|s| s.info().id.to_owned())
            .collect();
        let history = self.knobs.history.clone();
        let result = match Audit::connect_lazy(
            &lab.info.postgres_url,
            Some(&lab.info.mysql_url),
            history,
            safe,
        ) {
            Ok(audit) => {
                self.audit = audit;
                body(self, &mut lab).await
            }
            Err(error) => Err(error),
        };
        self.audit = Audit::default();
        lab.stop().await;
        result
    }

    /// A race on `target` shaped by `case`, judged by its expectation.
    async fn race(&mut self, target: &Gateway, case: Case<'_>) -> anyhow::Result<ScenarioRow> {
        let spec = self.spec(&case);
        let row = race(target, &spec, &self.audit).await?;
        Ok(judge(row, case.scenario, case.variant, case.expect))
    }

    /// Several races at once, each on a product of its own: for races
    /// that mostly wait (paced arrivals, no lock to spin on), whose
    /// verdicts do not depend on the machine being idle.
    async fn races_at_once(
        &mut self,
        cases: Vec<(&Gateway, Case<'_>)>,
    ) -> anyhow::Result<Vec<ScenarioRow>> {
        let specs: Vec<RaceSpec> = cases.iter().map(|(_, case)| self.spec(case)).collect();
        let audit = &self.audit;
        let raced = cases
            .iter()
            .zip(&specs)
            .map(|((target, _), spec)| race(target, spec, audit));
        let rows = futures::future::try_join_all(raced).await?;
        Ok(rows
            .into_iter()
            .zip(cases)
            .map(|(row, (_, case))| judge(row, case.scenario, case.variant, case.expect))
            .collect())
    }

    /// `case` as the driver races it, on a fresh product.
    fn spec(&mut self, case: &Case<'_>) -> RaceSpec {
        RaceSpec {
            product_id: self.product(),
            strategy: case.strategy.to_owned(),
            stock: case.stock,
            buyers: case.buyers,
            concurrency: self.knobs.concurrency.min(case.buyers.max(1)),
            pace: case.pace_ms.map(Duration::from_millis),
            settings: case.settings,
            reserving: 0,
            payer: None,
        }
    }
}

/// One race of a scenario.
struct Case<'a> {
    scenario: Scenario,
    variant: &'a str,
    strategy: &'a str,
    stock: i64,
    buyers: usize,
    /// Spread arrivals this many ms apart instead of one burst.
    pace_ms: Option<u64>,
    settings: Settings,
    expect: Expect,
}

impl<'a> Case<'a> {
    /// A burst of `buyers` on `stock` units under `strategy`.
    fn new(
        scenario: Scenario,
        strategy: &'a str,
        stock: i64,
        buyers: usize,
        expect: Expect,
    ) -> Self {
        Self {
            scenario,
            variant: "",
            strategy,
            stock,
            buyers,
            pace_ms: None,
            settings: Settings::default(),
            expect,
        }
    }

    fn variant(mut self, variant: &'a str) -> Self {
        self.variant = variant;
        self
    }

    fn settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    fn paced(mut self, ms: u64) -> Self {
        self.pace_ms = Some(ms);
        self
    }
}

fn judge(row: Row, scenario: Scenario, variant: &str, expect: Expect) -> ScenarioRow {
    ScenarioRow {
        met: met(expect, &row),
        expected: expect.text().to_owned(),
        scenario: scenario.name().to_owned(),
        variant: variant.to_owned(),
        row,
        masters: Vec::new(),
        cut: None,
        reconciled: None,
        slowdown: None,
        window: None,
    }
}

/// Runs `scenarios`, in order, and returns their rows.
pub async fn run(scenarios: &[Scenario], knobs: Knobs) -> anyhow::Result<Vec<ScenarioRow>> {
    let mut ctx = Ctx {
        knobs,
        catalogue: Catalogue::new(),
        next_product: 7000,
        audit: Audit::default(),
    };
    anyhow::ensure!(
        ctx.knobs.redis_cluster.is_none() || scenarios == [Scenario::Contention],
        "--redis-cluster goes with --scenario contention only (the cluster scenarios start their own cluster; the others stage faults of one Redis)"
    );
    let mut rows = Vec::new();
    for &scenario in scenarios {
        eprintln!("scenario {}…", scenario.name());
        rows.extend(stage(scenario, &mut ctx).await?);
    }
    Ok(rows)
}

/// Sets up, faults and races one scenario.
async fn stage(scenario: Scenario, ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    match scenario {
        Scenario::Contention => contention::run(ctx).await,
        Scenario::TwoInstancesLocalLock => local_lock::run(ctx).await,
        Scenario::LeaseExpiry => lease_expiry::run(ctx).await,
        Scenario::FrozenHolder => frozen_holder::run(ctx).await,
        Scenario::HolderCrash => holder_crash::run(ctx).await,
        Scenario::RedlockMinorityDown => redlock_minority::run(ctx).await,
        Scenario::SegmentScaling => segment_scaling::run(ctx).await,
        Scenario::RateLimit => rate_limit::run(ctx).await,
        Scenario::RepeatableRead => repeatable_read::run(ctx).await,
        Scenario::RedisCrash => redis_crash::run(ctx).await,
        Scenario::SlowDisk => slow_disk::run(ctx).await,
        Scenario::PowerCut => power_cut::run(ctx).await,
        Scenario::PgRestart => pg_restart::run(ctx).await,
        Scenario::InstanceKill => instance_kill::run(ctx).await,
        Scenario::Partition => partition::run(ctx).await,
        Scenario::RedisFailover => redis_failover::run(ctx).await,
        Scenario::ClusterSpread => cluster_spread::run(ctx).await,
        Scenario::ClusterFailover => cluster_failover::run(ctx).await,
        Scenario::LatePayment => late_payment::run(ctx).await,
        Scenario::ReaperCrash => reaper_crash::run(ctx).await,
        Scenario::AbandonedCarts => abandoned_carts::run(ctx).await,
        Scenario::ClockSkew => clock_skew::run(ctx).await,
        Scenario::BackendSlowdown => backend_slowdown::run(ctx).await,
        Scenario::Restock => restock::run(ctx).await,
        Scenario::PauseResume => pause_resume::run(ctx).await,
    }
}

/// A scripted buy fired in the background; its result joins the row.
type Pending = tokio::task::JoinHandle<Attempt>;

fn buy_in_background(target: &Gateway, product: i64, user: &str) -> Pending {
    let (target, user) = (target.clone(), user.to_owned());
    tokio::spawn(async move { Attempt::make(&target, product, &user).await })
}

impl Ctx {
    /// The row of a scripted race: the drained ledger, every buy's result
    /// and the history check.
    async fn scripted_row(
        &self,
        target: &Gateway,
        product: i64,
        attempts: &[Attempt],
        started: Instant,
    ) -> anyhow::Result<Row> {
        settled_row(target, &self.audit, product, attempts, started).await
    }
}

/// Sends `signal` to a lab process, naming the fault in the log.
fn fault(lab: &Lab, process: &str, signal: Signal) -> anyhow::Result<()> {
    eprintln!("  fault: {signal} -> {process}");
    lab.signal(process, signal)
}

/// How long one step of a scripted scenario may take.
const STEP: Duration = Duration::from_secs(20);

/// Polls `check` every 50 ms until it holds; fails after [`STEP`].
async fn until<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        anyhow::ensure!(started.elapsed() < STEP, "{what}: not after {STEP:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
