//! Named scenarios: `seckill race --scenario NAME` sets up the topology,
//! the settings and the fault, races the strategies the scenario concerns,
//! and checks each row against the outcome the classic articles predict.

mod contention;
mod frozen_holder;
mod holder_crash;
mod lease_expiry;
mod local_lock;
mod rate_limit;
mod redlock_minority;
mod segment_scaling;

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::client::{BuyResult, Target};
use super::driver::{RaceSpec, Row, drained_ledger, race, summarize};
use crate::lab::nginx::GatewayLimits;
use crate::lab::{Lab, LabArgs};

/// Every scenario, in the order `--scenario all` runs them.
pub const NAMES: &[&str] = &[
    "contention",
    "two-instances-local-lock",
    "lease-expiry",
    "frozen-holder",
    "holder-crash",
    "redlock-minority-down",
    "segment-scaling",
    "rate-limit",
];

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
}

/// What a scenario predicts for a row. Every expectation also requires
/// `client_ok == sold`: a 200 without an order is never acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Sells more than the stock.
    Oversells,
    /// Never sells more than the stock.
    NoOversell,
    /// Sells exactly the stock, no more.
    SellsAll,
    /// Sells nothing: a lock nobody can take, every buyer busy.
    Stalls,
    /// Behind tight limits: both the gateway and the service answer 429,
    /// some buyers still buy, nothing is oversold, and every answer is a
    /// sale, a 429 or `sold_out`.
    Throttled,
}

impl Expect {
    fn text(self) -> &'static str {
        match self {
            Self::Oversells => "oversells (oversold > 0)",
            Self::NoOversell => "oversold = 0",
            Self::SellsAll => "sells exactly the stock, oversold = 0",
            Self::Stalls => "stalls: sold = 0, buyers busy",
            Self::Throttled => "429s from gateway and service, counted apart; sells; oversold = 0",
        }
    }

    fn met(self, row: &Row) -> bool {
        let honest = row.client_ok == row.sold;
        honest
            && match self {
                Self::Oversells => row.oversold > 0,
                Self::NoOversell => row.oversold == 0,
                Self::SellsAll => row.oversold == 0 && row.sold == row.initial,
                Self::Stalls => row.sold == 0 && row.errors.get("busy").copied().unwrap_or(0) > 0,
                Self::Throttled => {
                    let count = |code: &str| row.errors.get(code).copied().unwrap_or(0);
                    let refused: u64 = row.errors.values().sum();
                    let expected = count(GATEWAY_429) + count(SERVICE_429) + count("sold_out");
                    row.oversold == 0
                        && row.sold > 0
                        && count(GATEWAY_429) > 0
                        && count(SERVICE_429) > 0
                        && refused == expected
                }
            }
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
}

/// What a scenario works with: its knobs, a product-id allocator and the
/// labs it starts.
pub struct Ctx {
    knobs: Knobs,
    next_product: i64,
}

impl Ctx {
    fn product(&mut self) -> i64 {
        self.next_product += 1;
        self.next_product
    }

    async fn lab(&self, instances: usize) -> anyhow::Result<Lab> {
        self.lab_with(instances, Default::default(), Vec::new())
            .await
    }

    /// A lab with the gateway's limits and the instances' environment
    /// given (the edge scenarios tighten them).
    async fn lab_with(
        &self,
        instances: usize,
        gateway: GatewayLimits,
        instance_env: Vec<(String, String)>,
    ) -> anyhow::Result<Lab> {
        Lab::start(&LabArgs {
            instances,
            gateway_port: None,
            admin_token: None,
            json: false,
            gateway,
            instance_env,
        })
        .await
    }

    /// A race on `target` shaped by `case`, judged by its expectation.
    async fn race(&mut self, target: &Target, case: Case<'_>) -> anyhow::Result<ScenarioRow> {
        let spec = RaceSpec {
            product_id: self.product(),
            strategy: case.strategy.to_owned(),
            stock: case.stock,
            buyers: case.buyers,
            concurrency: self.knobs.concurrency.min(case.buyers.max(1)),
            pace: case.pace_ms.map(Duration::from_millis),
            settings: case.settings.as_object().cloned().unwrap_or_default(),
        };
        let row = race(target, &spec).await?;
        Ok(judge(row, case.scenario, case.variant, case.expect))
    }
}

/// One race of a scenario.
struct Case<'a> {
    scenario: &'a str,
    variant: &'a str,
    strategy: &'a str,
    stock: i64,
    buyers: usize,
    /// Spread arrivals this many ms apart instead of one burst.
    pace_ms: Option<u64>,
    settings: Value,
    expect: Expect,
}

impl<'a> Case<'a> {
    /// A burst of `buyers` on `stock` units under `strategy`.
    fn new(
        scenario: &'a str,
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
            settings: json!({}),
            expect,
        }
    }

    fn variant(mut self, variant: &'a str) -> Self {
        self.variant = variant;
        self
    }

    fn settings(mut self, settings: Value) -> Self {
        self.settings = settings;
        self
    }

    fn paced(mut self, ms: u64) -> Self {
        self.pace_ms = Some(ms);
        self
    }
}

fn judge(row: Row, scenario: &str, variant: &str, expect: Expect) -> ScenarioRow {
    ScenarioRow {
        met: expect.met(&row),
        expected: expect.text().to_owned(),
        scenario: scenario.to_owned(),
        variant: variant.to_owned(),
        row,
    }
}

/// Runs the named scenario (or `all`) and returns its rows.
pub async fn run(name: &str, knobs: Knobs) -> anyhow::Result<Vec<ScenarioRow>> {
    let mut ctx = Ctx {
        knobs,
        next_product: 7000,
    };
    let names: Vec<&str> = if name == "all" {
        NAMES.to_vec()
    } else {
        vec![name]
    };
    let mut rows = Vec::new();
    for name in names {
        eprintln!("scenario {name}…");
        let found = match name {
            "contention" => contention::run(&mut ctx).await,
            "two-instances-local-lock" => local_lock::run(&mut ctx).await,
            "lease-expiry" => lease_expiry::run(&mut ctx).await,
            "frozen-holder" => frozen_holder::run(&mut ctx).await,
            "holder-crash" => holder_crash::run(&mut ctx).await,
            "redlock-minority-down" => redlock_minority::run(&mut ctx).await,
            "segment-scaling" => segment_scaling::run(&mut ctx).await,
            "rate-limit" => rate_limit::run(&mut ctx).await,
            other => anyhow::bail!(
                "unknown scenario {other:?}; known: all, {}",
                NAMES.join(", ")
            ),
        };
        rows.extend(found?);
    }
    Ok(rows)
}

/// A scripted buy fired in the background; its result joins the row.
type Pending = tokio::task::JoinHandle<(BuyResult, Duration)>;

fn buy_in_background(target: &Target, product: i64, user: &str) -> Pending {
    let (target, user) = (target.clone(), user.to_owned());
    tokio::spawn(async move {
        let sent = Instant::now();
        let result = target.buy(product, &user).await;
        (result, sent.elapsed())
    })
}

/// Resets `product` through `target` with `settings`.
async fn reset(
    target: &Target,
    product: i64,
    strategy: &str,
    stock: i64,
    settings: &Value,
) -> anyhow::Result<()> {
    let mut body: Map<String, Value> = settings.as_object().cloned().unwrap_or_default();
    body.insert("stock".into(), json!(stock));
    body.insert("strategy".into(), json!(strategy));
    target.reset(product, &Value::Object(body)).await?;
    Ok(())
}

/// Fires `buyers` buys at `target`, `concurrency` at a time, and collects
/// their results (for the scripted scenarios' follow-up traffic).
async fn buy_many(
    target: &Target,
    product: i64,
    prefix: &str,
    buyers: usize,
    concurrency: usize,
) -> Vec<(BuyResult, Duration)> {
    use futures::StreamExt;
    futures::stream::iter(0..buyers)
        .map(|i| {
            let user = format!("{prefix}-{i}");
            async move {
                let sent = Instant::now();
                let result = target.buy(product, &user).await;
                (result, sent.elapsed())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await
}

/// The row of a scripted race: the drained ledger and every buy's result.
async fn scripted_row(
    target: &Target,
    product: i64,
    strategy: &str,
    outcomes: &[(BuyResult, Duration)],
    started: Instant,
) -> anyhow::Result<Row> {
    let ledger = drained_ledger(target, product).await?;
    Ok(summarize(strategy, &ledger, outcomes, started.elapsed()))
}

/// Sends `signal` to a lab process, naming the fault in the log.
fn fault(lab: &Lab, process: &str, signal: Signal) -> anyhow::Result<()> {
    eprintln!("  fault: {signal} -> {process}");
    lab.signal(process, signal)
}

/// The table of a scenario run: the race columns plus expected and met.
pub fn render(rows: &[ScenarioRow]) -> String {
    let mut out = format!(
        "{:<24} {:<16} {:<14} {:>7} {:>6} {:>9} {:>8} {:>9} {:>8} {:>8}  {:<5} expected / errors\n",
        "scenario",
        "strategy",
        "variant",
        "initial",
        "sold",
        "client_ok",
        "oversold",
        "remaining",
        "rps",
        "p99_ms",
        "met"
    );
    for r in rows {
        let errors: Vec<String> = r
            .row
            .errors
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        out.push_str(&format!(
            "{:<24} {:<16} {:<14} {:>7} {:>6} {:>9} {:>8} {:>9} {:>8.0} {:>8.1}  {:<5} {} / {}\n",
            r.scenario,
            r.row.strategy,
            r.variant,
            r.row.initial,
            r.row.sold,
            r.row.client_ok,
            r.row.oversold,
            r.row.remaining,
            r.row.rps,
            r.row.p99_ms,
            if r.met { "yes" } else { "NO" },
            r.expected,
            errors.join(" ")
        ));
    }
    out
}
