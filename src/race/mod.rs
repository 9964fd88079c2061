//! `seckill race`: the built-in load driver and the comparison table.
//!
//! For each strategy: reset a product, fire the buyers, wait until the
//! order writer has drained, read the ledger. Against `--url`, or against a
//! lab it starts itself.

pub mod attempt;
pub mod bench;
pub mod driver;
pub mod payer;
pub mod scenario;
mod table;

use std::path::PathBuf;

use anyhow::Context;
use clap::ValueEnum;

use crate::backends::flags::{Databases, GatewayFlags};
use crate::instance::auth::token::Key;
use crate::lab::client::Gateway;
use crate::lab::{Lab, LabArgs, LabShape};
use crate::model::info::Scenario;
use crate::model::product::hold_terms::Giveback;
use crate::model::product::{Recipe, Settings, StoreKind, now_ms};
use driver::{Audit, RaceSpec, Row, race};
use payer::{DelayMs, Payer};

/// The race's flags; each has an environment fallback.
#[derive(Debug, Clone, clap::Args)]
pub struct RaceArgs {
    /// The gateway to race on; without one, a lab is started for the race
    /// and stopped afterwards.
    #[command(flatten)]
    pub gateway: GatewayFlags,
    /// The lab started when there is no --url (its buyer identity is the
    /// race's too).
    #[command(flatten)]
    pub lab: LabShape,
    /// Race on a lab whose instances use a Redis Cluster of this many
    /// masters (3 when the flag has no value), as `seckill lab
    /// --redis-cluster`. Of the scenarios, `contention` honours it (the
    /// cluster scenarios start their own).
    #[arg(
        long,
        env = "SECKILL_LAB_REDIS_CLUSTER",
        num_args = 0..=1,
        default_missing_value = "3"
    )]
    pub redis_cluster: Option<usize>,
    /// Strategies to race, comma-separated (default: every registered one,
    /// and each of its recipes as `strategy:recipe`, e.g.
    /// `zookeeper:read-write`).
    #[arg(long, env = "SECKILL_RACE_STRATEGIES", value_delimiter = ',')]
    pub strategies: Vec<String>,
    /// Units on sale per strategy.
    #[arg(long, env = "SECKILL_RACE_STOCK", default_value_t = 100)]
    pub stock: i64,
    /// Buy requests per strategy, each from a distinct buyer.
    #[arg(long, env = "SECKILL_RACE_BUYERS", default_value_t = 1000)]
    pub buyers: usize,
    /// Requests in flight at once.
    #[arg(long, env = "SECKILL_RACE_CONCURRENCY", default_value_t = 200)]
    pub concurrency: usize,
    /// Simulated work inside the critical section, in ms. The default of
    /// 1 ms is a realistic order step and makes every unsafe strategy's
    /// window wide enough to oversell on every run.
    #[arg(long, env = "SECKILL_RACE_WORK_MS", default_value_t = 1)]
    pub work_ms: u64,
    /// Lock lease in ms (default: the product default).
    #[arg(long, env = "SECKILL_RACE_LEASE_MS")]
    pub lease_ms: Option<u64>,
    /// Lock acquire timeout in ms (default: the product default).
    #[arg(long, env = "SECKILL_RACE_ACQUIRE_TIMEOUT_MS")]
    pub acquire_timeout_ms: Option<u64>,
    /// Optimistic retries (default: the product default).
    #[arg(long, env = "SECKILL_RACE_MAX_RETRIES")]
    pub max_retries: Option<u32>,
    /// Race each strategy this many times (every safe one, unless
    /// --strategies names others) and print one summary line per
    /// strategy: a safe strategy must hold in every race, not in one.
    /// With --scenario: run the scenario this many times, every row of
    /// every run judged.
    #[arg(long, env = "SECKILL_RACE_REPEAT", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Open each product's sale this many ms after its reset
    /// (`opens_at_ms`): the buyers come early, are told `not_started`,
    /// and come back at the opening; the table shows the rush (requests
    /// that came early, when the last unit went).
    #[arg(long, env = "SECKILL_RACE_OPENS_IN_MS")]
    pub opens_in_ms: Option<u64>,
    /// Pre-booking: this many buyers (the first ones) reserve before the
    /// opening, and only they may buy (`prebooking`; needs
    /// --opens-in-ms); the others are told `not_reserved`.
    #[arg(long, env = "SECKILL_RACE_RESERVING", requires = "opens_in_ms")]
    pub reserving: Option<usize>,
    /// Release each product's stock in this many waves (`waves`), from
    /// the opening: buyers told `sold_out` until the next wave come back
    /// for it.
    #[arg(long, env = "SECKILL_RACE_WAVES", default_value_t = 1)]
    pub waves: u32,
    /// Time between two waves, in ms (`wave_every_ms`).
    #[arg(long, env = "SECKILL_RACE_WAVE_EVERY_MS", default_value_t = 0)]
    pub wave_every_ms: u64,
    /// Hold each sale this many ms for its payment (`pay_within_ms`): a
    /// 200 is a hold, and the holders follow the payer model below.
    #[arg(long, env = "SECKILL_RACE_PAY_WITHIN_MS", default_value_t = 0)]
    pub pay_within_ms: u64,
    /// How an unpaid hold's unit goes back on sale (`giveback`).
    #[arg(long, env = "SECKILL_RACE_GIVEBACK", value_enum, default_value_t)]
    pub giveback: Giveback,
    /// With --pay-within-ms: the share of holders who pay (0 to 1).
    #[arg(long, env = "SECKILL_RACE_PAY_RATIO", default_value_t = 1.0)]
    pub pay_ratio: f64,
    /// With --pay-within-ms: the share of holders who cancel (0 to 1);
    /// the others walk away and watch their hold go back.
    #[arg(long, env = "SECKILL_RACE_CANCEL_RATIO", default_value_t = 0.0)]
    pub cancel_ratio: f64,
    /// With --pay-within-ms: how long a holder takes to pay or cancel, in
    /// ms, drawn uniformly from `MIN..MAX` (or fixed).
    #[arg(long, env = "SECKILL_RACE_PAY_DELAY_MS", default_value = "0..200")]
    pub pay_delay_ms: DelayMs,
    /// First product id used; strategy i races on product first + i.
    #[arg(long, env = "SECKILL_RACE_PRODUCT", default_value_t = 9001)]
    pub first_product: i64,
    /// Run a named failure scenario instead, or all of them in order (each
    /// starts its own lab and injects its fault). Exits 1 unless every
    /// expectation is met.
    #[arg(long, env = "SECKILL_RACE_SCENARIO")]
    pub scenario: Option<ScenarioArg>,
    /// Append every race's history (each request: start, end, status,
    /// order id, instance; JSON lines) to this file, for `seckill check`.
    /// Every race's history is checked against PostgreSQL either way.
    #[arg(long, env = "SECKILL_RACE_HISTORY")]
    pub history: Option<PathBuf>,
    /// With --url: where its orders are, so each race's history can be
    /// checked (a lab's own are used otherwise).
    #[command(flatten)]
    pub databases: Databases,
    /// Sell on a hidden path (`hidden_path`): each buyer fetches its
    /// one-time path (`GET /stock/{id}/path`) before it buys, as a browser
    /// would.
    #[arg(long, env = "SECKILL_RACE_HIDDEN_PATH")]
    pub hidden_path: bool,
    /// With --url and instances that take tokens: the key to sign them
    /// with (theirs).
    #[arg(long, env = "SECKILL_BUYER_KEY_FILE")]
    pub buyer_key_file: Option<PathBuf>,
    /// Also write the rows as a JSON array to this file (`--json`, in the
    /// commands that have it, means "print JSON instead of prose").
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write the comparison as a self-contained HTML page (chart and
    /// numbers), as `seckill report` would from the JSON.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Runs the race and prints the table. `Ok(false)` when a safe strategy
/// oversold or a strategy's client 200s differ from its recorded orders.
pub async fn run(args: RaceArgs) -> anyhow::Result<bool> {
    if let Some(name) = args.scenario {
        return run_scenario(name, &args).await;
    }
    let lab = match &args.gateway.url {
        Some(_) => None,
        None => {
            eprintln!("starting a lab with {} instances…", args.lab.instances);
            let lab_args = LabArgs {
                admin_token: args.gateway.admin_token.clone(),
                redis_cluster: args.redis_cluster,
                ..LabArgs::with_shape(args.lab.clone())
            };
            let lab = Lab::start(&lab_args).await?;
            eprintln!("watch it live: {}/", lab.info.gateway_url);
            Some(lab)
        }
    };
    let result = race_all(&args, lab.as_ref()).await;
    if let Some(lab) = lab {
        lab.stop().await;
    }
    let (rows, safe) = result?;
    save(&args, &rows)?;
    Ok(table::verdict(&rows, &safe))
}

async fn race_all(args: &RaceArgs, lab: Option<&Lab>) -> anyhow::Result<(Vec<Row>, Vec<String>)> {
    let (url, token, key) = match lab {
        Some(lab) => (
            lab.info.gateway_url.clone(),
            lab.info.admin_token.clone(),
            lab.info.buyer_key()?,
        ),
        None => (
            args.gateway.url.clone().unwrap_or_default(),
            args.gateway
                .admin_token
                .clone()
                .context("--admin-token (or SECKILL_ADMIN_TOKEN) is needed with --url")?,
            args.buyer_key_file.as_deref().map(Key::load).transpose()?,
        ),
    };
    let target = Gateway::new(&url, &token, args.concurrency)?.with_buyer_key(key.as_ref());
    let catalogue = target.strategies().await?;
    let safe: Vec<String> = catalogue
        .iter()
        .filter(|c| c.safe)
        .flat_map(|c| c.labels())
        .collect();
    let audit = audit(args, lab, &safe)?;
    let strategies: Vec<String> = match (args.strategies.is_empty(), args.repeat) {
        (false, _) => args.strategies.clone(),
        (true, 1) => catalogue.iter().flat_map(|c| c.labels()).collect(),
        (true, _) => safe.clone(),
    };
    let settings = settings(args);
    let mut rows = Vec::new();
    let races = (0..args.repeat as usize).flat_map(|_| strategies.iter());
    for (index, label) in races.enumerate() {
        let (strategy, recipe, store) = split_label(label)?;
        let spec = RaceSpec {
            product_id: args.first_product + index as i64,
            strategy,
            stock: args.stock,
            buyers: args.buyers,
            concurrency: args.concurrency,
            pace: None,
            settings: Settings {
                opens_at_ms: args.opens_in_ms.map_or(0, |ms| now_ms() + ms),
                recipe,
                store,
                prebooking: args.reserving.is_some(),
                ..settings
            },
            reserving: args.reserving.unwrap_or(0),
            payer: payer(args)?,
        };
        let mut row = race(&target, &spec, &audit).await?;
        row.strategy.clone_from(label);
        rows.push(row);
    }
    println!("{}", persistence_line(&target).await);
    if args.repeat > 1 {
        print!("{}", table::render_repeats(&rows, &safe));
    } else {
        print!("{}", table::render(&rows, &safe));
    }
    Ok((rows, safe))
}

/// The history check of every race: against the lab's databases, or the
/// ones `--database-url` and `--mysql-url` name (without them, only the
/// history is written).
fn audit(args: &RaceArgs, lab: Option<&Lab>, safe: &[String]) -> anyhow::Result<Audit> {
    let (database_url, mysql_url) = match lab {
        Some(lab) => (
            Some(lab.info.postgres_url.clone()),
            Some(lab.info.mysql_url.clone()),
        ),
        None => (
            args.databases.database_url.clone(),
            args.databases.mysql_url.clone(),
        ),
    };
    Ok(match database_url {
        Some(url) => Audit::connect_lazy(
            &url,
            mysql_url.as_deref(),
            args.history.clone(),
            safe.to_vec(),
        )?,
        None => Audit {
            dbs: None,
            history: args.history.clone(),
            safe: safe.to_vec(),
        },
    })
}

/// The payer model of a race with holds, from the flags.
fn payer(args: &RaceArgs) -> anyhow::Result<Option<Payer>> {
    if args.pay_within_ms == 0 {
        return Ok(None);
    }
    let (pay, cancel) = (args.pay_ratio, args.cancel_ratio);
    anyhow::ensure!(
        (0.0..=1.0).contains(&pay) && (0.0..=1.0).contains(&cancel) && pay + cancel <= 1.0,
        "--pay-ratio {pay} and --cancel-ratio {cancel}: each from 0 to 1, together at most 1"
    );
    Ok(Some(Payer {
        pay_ratio: pay,
        cancel_ratio: cancel,
        delay: args.pay_delay_ms,
    }))
}

/// The settings every race of the comparison shares, from the flags.
fn settings(args: &RaceArgs) -> Settings {
    let defaults = Settings::default();
    Settings {
        work_ms: args.work_ms,
        lease_ms: args.lease_ms.unwrap_or(defaults.lease_ms),
        acquire_timeout_ms: args
            .acquire_timeout_ms
            .unwrap_or(defaults.acquire_timeout_ms),
        max_retries: args.max_retries.unwrap_or(defaults.max_retries),
        waves: args.waves,
        wave_every_ms: args.wave_every_ms,
        pay_within_ms: args.pay_within_ms,
        giveback: args.giveback,
        hidden_path: args.hidden_path,
        ..defaults
    }
}

/// A comparison label, `strategy[:recipe][@store]`, as the strategy id,
/// the recipe and the store to reset it with.
pub fn split_label(label: &str) -> anyhow::Result<(String, Recipe, Option<StoreKind>)> {
    let (rest, store) = match label.split_once('@') {
        None => (label, None),
        Some((rest, name)) => {
            let store = StoreKind::parse(name).with_context(|| {
                let known: Vec<&str> = StoreKind::ALL.iter().map(|s| s.as_str()).collect();
                format!("{label}: no store {name:?}; known: {}", known.join(", "))
            })?;
            (rest, Some(store))
        }
    };
    match rest.split_once(':') {
        None => Ok((rest.to_owned(), Recipe::default(), store)),
        Some((id, name)) => {
            let recipe = Recipe::parse(name).with_context(|| {
                let known: Vec<&str> = Recipe::ALL.iter().map(|r| r.as_str()).collect();
                format!("{label}: no recipe {name:?}; known: {}", known.join(", "))
            })?;
            Ok((id.to_owned(), recipe, store))
        }
    }
}

/// What the backends keep after a crash, as the gateway's `/config` says:
/// a number means little without it.
async fn persistence_line(target: &Gateway) -> String {
    let config = match target.config().await {
        Ok(config) => config,
        Err(error) => return format!("persistence: unknown ({error})"),
    };
    let p = &config["persistence"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_owned();
    let mysql = match p["mysql"]["innodb_flush_log_at_trx_commit"].as_i64() {
        Some(flush) => format!("; mysql innodb_flush_log_at_trx_commit={flush}"),
        None => String::new(),
    };
    format!(
        "persistence: {} (postgres fsync={} synchronous_commit={}; redis appendonly={} appendfsync={}{mysql})",
        text(&p["mode"]),
        text(&p["postgres"]["fsync"]),
        text(&p["postgres"]["synchronous_commit"]),
        text(&p["redis"]["appendonly"]),
        text(&p["redis"]["appendfsync"]),
    )
}

/// `--scenario`: one scenario, or `all` of them in the order of
/// [`Scenario::ALL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioArg {
    /// Every scenario.
    All,
    /// One.
    One(Scenario),
}

impl ScenarioArg {
    /// The scenarios it names, in the order they run.
    pub fn scenarios(self) -> Vec<Scenario> {
        match self {
            Self::All => Scenario::ALL.to_vec(),
            Self::One(scenario) => vec![scenario],
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::One(scenario) => scenario.name(),
        }
    }
}

impl ValueEnum for ScenarioArg {
    fn value_variants<'a>() -> &'a [Self] {
        static CHOICES: std::sync::LazyLock<Vec<ScenarioArg>> = std::sync::LazyLock::new(|| {
            std::iter::once(ScenarioArg::All)
                .chain(Scenario::ALL.map(ScenarioArg::One))
                .collect()
        });
        &CHOICES
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        match self {
            Self::All => {
                Some(clap::builder::PossibleValue::new("all").help("every scenario, in this order"))
            }
            Self::One(scenario) => scenario.to_possible_value(),
        }
    }
}

/// `--scenario NAME`: the scenario's rows, each with its expectation.
async fn run_scenario(name: ScenarioArg, args: &RaceArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(
        args.gateway.url.is_none(),
        "scenarios start their own labs (they kill and freeze processes); drop --url"
    );
    let knobs = scenario::Knobs {
        stock: args.stock,
        buyers: args.buyers,
        concurrency: args.concurrency,
        work_ms: args.work_ms,
        history: args.history.clone(),
        redis_cluster: args.redis_cluster,
    };
    let runs: Vec<Scenario> = (0..args.repeat).flat_map(|_| name.scenarios()).collect();
    let rows = scenario::run(&runs, knobs).await?;
    print!("{}", table::render_scenarios(&rows));
    save(args, &rows)?;
    let missed: Vec<String> = rows
        .iter()
        .filter(|r| !r.met)
        .map(|r| format!("{} {} {}", r.scenario, r.row.strategy, r.variant))
        .collect();
    for miss in &missed {
        eprintln!("NOT MET: {miss}");
    }
    Ok(missed.is_empty())
}

/// Writes `--json` and `--report` when asked; the report is drawn from
/// the same JSON rows, as `seckill report --input` would.
fn save<T: serde::Serialize>(args: &RaceArgs, rows: &[T]) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(rows)?;
    if let Some(path) = &args.out {
        std::fs::write(path, &json).with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.report {
        let title = match &args.scenario {
            Some(name) => format!("seckill race --scenario {}", name.name()),
            None => "seckill race: sold vs stock per strategy".to_owned(),
        };
        let bars = crate::judge::report::bars_from_json(&json)?;
        crate::judge::report::write(path, None, &title, &bars)?;
    }
    Ok(())
}
