//! `seckill bench`: sustained throughput of the chosen strategies, side by
//! side with three baselines measured in the same run — the HTTP path
//! alone (`GET /healthz` through the same nginx and instances), Redis
//! alone (the same check-and-decrement script, straight from the bench)
//! and PostgreSQL alone (the same hot-row `UPDATE`, one statement per
//! transaction) — each figure also as a ratio to each baseline. This
//! machine is shared and noisy: absolute numbers move from run to run,
//! ratios within one run much less.
//!
//! A fourth figure is the answer after a sale is over: buys of a product
//! with no stock, `sold_out` from each instance's memory; a fifth the
//! same with an Idempotency-Key on every buy (one lookup of the key, in
//! case it already has an order, then the flag's answer).
//!
//! Every strategy runs twice, with `per_user_limit` 0 and 1, each request
//! from a new buyer, for a fixed duration after a warm-up; its history is
//! checked like every race's (`history_ok`, `oversold`).

mod commands;
mod cpu;
mod groups;
pub mod guards;
mod lean;
mod load;
mod svg;
mod wrk;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::instance::auth::BuyerAuth;
use crate::lab::client::Gateway;
use crate::lab::{Lab, LabArgs, LabShape};
use crate::model::product::{MAX_STOCK, Settings};
use crate::model::telemetry::{GROUP_SIZE, REAPER_LAG, WRITER_BATCH};
use crate::race::driver::{Audit, drained_ledger, reset, settled_row};
use crate::stock::strategy::Catalogue;
use load::Sample;

/// `seckill bench`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Strategies to measure, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "redis-lua,redis-group,db-atomic,db-group"
    )]
    pub strategies: Vec<String>,
    /// The lab the bench starts. With `--buyer-auth token` every buy
    /// carries a token signed for its new buyer (what that costs, against
    /// `header`, is the difference between two runs' ratios); wrk's
    /// figures are left out then (wrk cannot sign).
    #[command(flatten)]
    pub lab: LabShape,
    /// Seconds each figure is measured for.
    #[arg(long, default_value_t = 10)]
    pub duration_secs: u64,
    /// Seconds of load before each measurement, not counted.
    #[arg(long, default_value_t = 2)]
    pub warmup_secs: u64,
    /// Requests (or statements) in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Also measure each strategy with holds of this many ms
    /// (`pay_within_ms`; 0: not): nobody pays, so from the first hold's due
    /// time on, the reapers give units back at the sale's own rate. The
    /// figure is named `<strategy>+holds` and says how far behind its due
    /// time the reapers took a hold, on average.
    #[arg(long, default_value_t = 0)]
    pub pay_within_ms: u64,
    /// Also write the rows as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also draw the table as a chart, one bar per figure (SVG).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// Instead of the figures, what the adaptive limit and the breaker
    /// cost each strategy: two instances, one without them, loaded in
    /// alternated slices of one run ([`guards`]); `--out` writes its rows.
    #[arg(long)]
    pub guards: bool,
}

/// One figure of the bench.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchRow {
    /// `http`, `redis`, `postgres`, or a strategy id.
    pub name: String,
    /// The strategy's `per_user_limit` (none for a baseline).
    pub per_user_limit: Option<u32>,
    /// Operations per second over the measured window.
    pub ops_per_sec: f64,
    /// Of those, successful ones (a sale for a strategy) per second.
    pub ok_per_sec: f64,
    /// Median latency.
    pub p50_ms: f64,
    /// 99th percentile latency.
    pub p99_ms: f64,
    /// `ops_per_sec` over the HTTP path's.
    pub vs_http: f64,
    /// `ops_per_sec` over Redis alone.
    pub vs_redis: f64,
    /// `ops_per_sec` over PostgreSQL alone.
    pub vs_postgres: f64,
    /// A strategy's history check over everything it sold.
    pub history_ok: Option<bool>,
    /// A strategy's units sold beyond its stock.
    pub oversold: Option<i64>,
    /// A group-commit strategy's mean group (buyers per step), from the
    /// instances' `/metrics`.
    pub mean_group: Option<f64>,
    /// A figure with holds: how long after its due time the reapers took
    /// a hold, on average, from the instances' `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reaper_lag_ms: Option<f64>,
    /// Non-successes by error code.
    pub errors: BTreeMap<String, u64>,
    /// µs of CPU per operation over the measured seconds, by process
    /// group: the bench's client, nginx, the instances, Redis,
    /// PostgreSQL, MariaDB ([`cpu`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cpu_us: BTreeMap<String, f64>,
    /// µs of Redis's command time per operation, by part: the sale's
    /// scripts, the order writers' reads and acknowledgements
    /// ([`commands`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub redis_us: BTreeMap<String, f64>,
    /// A strategy's mean orders per writer batch during the figure, from
    /// the instances' `/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_batch: Option<f64>,
}

/// Starts a lab, measures, prints the table. `Ok(false)` when a strategy's
/// history check failed or it oversold.
pub async fn run(args: BenchArgs) -> anyhow::Result<bool> {
    anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
    let catalogue = Catalogue::new();
    for strategy in &args.strategies {
        anyhow::ensure!(
            catalogue.get(strategy).is_some(),
            "unknown strategy {strategy:?}"
        );
    }
    if args.guards {
        return guards_cost(&args, &catalogue).await;
    }
    eprintln!("starting a lab with {} instances…", args.lab.instances);
    let lab = Lab::start(&LabArgs::with_shape(args.lab.clone())).await?;
    let result = measure(&args, &lab, &catalogue).await;
    lab.stop().await;
    let rows = result?;
    println!(
        "persistence: {}; buyers: {}; {} s per figure after {} s of warm-up, {} in flight",
        args.lab.durability.as_str(),
        args.lab.buyer_auth.as_str(),
        args.duration_secs,
        args.warmup_secs,
        args.concurrency
    );
    print!("{}", render(&rows));
    print!("{}", render_cpu(&rows));
    let http = |name: &str| rows.iter().find(|r| r.name == name).map(|r| r.ops_per_sec);
    if let (Some(own), Some(wrk)) = (http("http"), http("http (wrk)")) {
        println!(
            "the bench's client: its HTTP path at {:.2}× wrk's (wrk figures: ×http over wrk's own HTTP path)",
            own / wrk.max(1e-9)
        );
    }
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.svg {
        let title = format!(
            "seckill bench: sustained operations per second ({} lab, {} in flight)",
            args.lab.durability.as_str(),
            args.concurrency
        );
        std::fs::write(path, svg::svg(&title, &rows))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(rows
        .iter()
        .all(|r| r.history_ok != Some(false) && r.oversold.unwrap_or(0) == 0))
}

/// `--guards`: the comparison's lab, its table, its rows to `--out`.
async fn guards_cost(args: &BenchArgs, catalogue: &Catalogue) -> anyhow::Result<bool> {
    eprintln!(
        "starting a lab with {} instances, {} without the guards…",
        args.lab.instances,
        guards::OFF
    );
    let lab = Lab::start(&guards::lab_args(args)?).await?;
    let result = guards::measure(args, &lab, catalogue).await;
    lab.stop().await;
    let rows = result?;
    println!(
        "persistence: {}; {} s per instance and load in {} slices, {} in flight",
        args.lab.durability.as_str(),
        args.duration_secs,
        guards::ROUNDS,
        args.concurrency
    );
    print!("{}", guards::render(&rows));
    if let Some(path) = &args.out {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(rows
        .iter()
        .all(|r| r.history_ok != Some(false) && r.oversold == 0))
}

async fn measure(
    args: &BenchArgs,
    lab: &Lab,
    catalogue: &Catalogue,
) -> anyhow::Result<Vec<BenchRow>> {
    let warmup = Duration::from_secs(args.warmup_secs);
    let duration = Duration::from_secs(args.duration_secs);
    let n = args.concurrency;
    let key = lab.info.buyer_key()?;
    let gateway =
        Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, n)?.with_buyer_key(key.as_ref());

    let groups = cpu::Groups::of(&lab.info.processes, &lab.info.redis_url);
    let (mut rows, bases) = baselines(&gateway, lab, &groups, (n, warmup, duration)).await?;

    let safe = catalogue
        .all()
        .filter(|s| s.info().safe)
        .map(|s| s.info().id.to_owned())
        .collect();
    let audit = Audit::connect_lazy(
        &lab.info.postgres_url,
        Some(&lab.info.mysql_url),
        None,
        safe,
    )?;
    for (index, strategy) in args.strategies.iter().enumerate() {
        let mut figures = vec![(0, 0), (1, 0)];
        if args.pay_within_ms > 0 {
            figures.push((0, args.pay_within_ms));
        }
        for (slot, (limit, pay_within_ms)) in figures.into_iter().enumerate() {
            let figure = Figure {
                groups: &groups,
                strategy,
                product: 990_001 + 3 * index as i64 + slot as i64,
                limit,
                pay_within_ms,
            };
            let window = (n, warmup, duration);
            rows.push(figure.measure(&gateway, lab, &audit, window, bases).await?);
        }
    }
    if wrk::installed() && args.lab.buyer_auth == BuyerAuth::Header {
        let window = (n, warmup, duration);
        let by_wrk = wrk_figures(&gateway, &groups, &args.strategies, window, bases).await?;
        rows.extend(by_wrk);
    }
    Ok(rows)
}

/// The same load from wrk ([`wrk`]): the HTTP path, then each strategy
/// with `per_user_limit` 1. A wrk figure's ×http is over wrk's own HTTP
/// path, so that it compares with the bench client's ratio; no history
/// (wrk keeps no answers), the oversell from the ledger, and no client
/// CPU (wrk is not the bench's process).
async fn wrk_figures(
    gateway: &Gateway,
    groups: &cpu::Groups,
    strategies: &[String],
    (n, warmup, duration): (usize, Duration, Duration),
    bases: [f64; 3],
) -> anyhow::Result<Vec<BenchRow>> {
    let base = &gateway.base;
    let window = (warmup, duration);
    eprintln!("bench: the HTTP path alone, from wrk");
    let load = wrk::rate(base, wrk::Load::Health, n, window);
    let (http, cpu) = cpu::around(groups, window, load).await;
    let http = http?;
    let mut rows = vec![BenchRow::of_wrk(
        "http (wrk)",
        None,
        http,
        [http, bases[1], bases[2]],
        &cpu,
    )];
    for (index, strategy) in strategies.iter().enumerate() {
        eprintln!("bench: {strategy}, per_user_limit 1, from wrk");
        let product = 990_101 + index as i64;
        let settings = Settings {
            work_ms: 0,
            per_user_limit: 1,
            ..Settings::default()
        };
        reset(gateway, product, strategy, MAX_STOCK, settings).await?;
        let load = wrk::rate(base, wrk::Load::Buys(product), n, window);
        let (rate, cpu) = cpu::around(groups, window, load).await;
        let name = format!("{strategy} (wrk)");
        let mut row = BenchRow::of_wrk(&name, Some(1), rate?, [http, bases[1], bases[2]], &cpu);
        row.oversold = Some(drained_ledger(gateway, product).await?.oversold);
        rows.push(row);
    }
    Ok(rows)
}

/// The figures every strategy is measured against (the HTTP path, Redis
/// and PostgreSQL alone, sold-out answers without and with an
/// Idempotency-Key), and the first three's
/// rates, the bases of every ratio.
async fn baselines(
    gateway: &Gateway,
    lab: &Lab,
    groups: &cpu::Groups,
    (n, warmup, duration): (usize, Duration, Duration),
) -> anyhow::Result<(Vec<BenchRow>, [f64; 3])> {
    let window = (warmup, duration);
    eprintln!("bench: the HTTP path alone");
    let (http, http_cpu) =
        cpu::around(groups, window, load::http(gateway, n, warmup, duration)).await;
    let http = http?;
    eprintln!("bench: Redis alone");
    let redis_url = &lab.info.redis_url;
    let (redis, redis_cpu) =
        cpu::around(groups, window, load::redis(redis_url, n, warmup, duration)).await;
    let redis = redis?;
    eprintln!("bench: PostgreSQL alone");
    let hot_row = 990_000;
    reset(
        gateway,
        hot_row,
        "db-atomic",
        MAX_STOCK,
        Settings::default(),
    )
    .await?;
    let pool = load::postgres_pool(&lab.info.postgres_url, n).await?;
    let pg = load::postgres(&pool, hot_row, n, warmup, duration);
    let (postgres, postgres_cpu) = cpu::around(groups, window, pg).await;
    pool.close().await;

    eprintln!("bench: sold-out answers");
    let sold_out_id = 990_999;
    reset(gateway, sold_out_id, "redis-lua", 0, Settings::default()).await?;
    let buys = load::buys(gateway, sold_out_id, false, n, warmup, duration);
    let (sold_out, sold_out_cpu) = cpu::around(groups, window, buys).await;
    let (sold_out, _, _) = sold_out?;
    // The same with an Idempotency-Key on every request: one lookup of
    // the key, then the flag's answer.
    eprintln!("bench: sold-out answers, keyed");
    let buys = load::buys(gateway, sold_out_id, true, n, warmup, duration);
    let (keyed, keyed_cpu) = cpu::around(groups, window, buys).await;
    let (keyed, _, _) = keyed?;

    let bases = [http.rate(), redis.rate(), postgres.rate()];
    let rows: Vec<BenchRow> = [
        ("http", &http, http_cpu),
        ("redis", &redis, redis_cpu),
        ("postgres", &postgres, postgres_cpu),
        ("sold-out", &sold_out, sold_out_cpu),
        ("sold-out keyed", &keyed, keyed_cpu),
    ]
    .into_iter()
    .map(|(name, sample, cpu)| BenchRow {
        cpu_us: cpu.per_op_us(sample.count()),
        redis_us: cpu.redis_per_op_us(sample.count()),
        ..BenchRow::of(name, None, sample, bases)
    })
    .collect();

    Ok((rows, bases))
}

/// One strategy figure: a strategy, its product, its limit and holds, and
/// the processes whose CPU it measures.
struct Figure<'a> {
    groups: &'a cpu::Groups,
    strategy: &'a str,
    product: i64,
    limit: u32,
    pay_within_ms: u64,
}

impl Figure<'_> {
    /// Measures the figure under `(in flight, warm-up, duration)`.
    async fn measure(
        &self,
        gateway: &Gateway,
        lab: &Lab,
        audit: &Audit,
        (n, warmup, duration): (usize, Duration, Duration),
        bases: [f64; 3],
    ) -> anyhow::Result<BenchRow> {
        let (strategy, limit) = (self.strategy, self.limit);
        let holds = self.pay_within_ms > 0;
        let name = if holds {
            format!("{strategy}+holds")
        } else {
            strategy.to_owned()
        };
        eprintln!("bench: {name}, per_user_limit {limit}");
        let settings = Settings {
            work_ms: 0,
            per_user_limit: limit,
            pay_within_ms: self.pay_within_ms,
            ..Settings::default()
        };
        reset(gateway, self.product, strategy, MAX_STOCK, settings).await?;
        let labels = format!("{{strategy=\"{strategy}\"}}");
        let series = [
            (GROUP_SIZE, labels.as_str()),
            (REAPER_LAG, ""),
            (WRITER_BATCH, ""),
        ];
        let (http, instances) = (&gateway.http, &lab.info.instances);
        let before = groups::totals(http, instances, &series).await?;
        let buys = load::buys(gateway, self.product, false, n, warmup, duration);
        let (measured, cpu) = cpu::around(self.groups, (warmup, duration), buys).await;
        let (sample, attempts, began) = measured?;
        let after = groups::totals(http, instances, &series).await?;
        let mean = |i: usize| after[i].mean_since(before[i]);
        let row = settled_row(gateway, audit, self.product, &attempts, began).await?;
        Ok(BenchRow {
            history_ok: row.history_ok,
            oversold: Some(row.oversold),
            mean_group: mean(0).map(round),
            reaper_lag_ms: holds.then(|| mean(1)).flatten().map(|s| round(s * 1000.0)),
            writer_batch: mean(2).map(round),
            cpu_us: cpu.per_op_us(sample.count()),
            redis_us: cpu.redis_per_op_us(sample.count()),
            ..BenchRow::of(&name, Some(limit), &sample, bases)
        })
    }
}

impl BenchRow {
    /// The row of `sample`, its rate over each of `bases` (the HTTP path,
    /// Redis, PostgreSQL); no history.
    fn of(name: &str, per_user_limit: Option<u32>, sample: &Sample, bases: [f64; 3]) -> Self {
        Self {
            ok_per_sec: round(sample.ok_rate()),
            p50_ms: sample.percentile_ms(0.50),
            p99_ms: sample.percentile_ms(0.99),
            errors: sample.errors.clone(),
            ..Self::at(name, per_user_limit, sample.rate(), bases)
        }
    }

    /// A figure of `rate` operations per second, every one a success,
    /// over each of `bases`; nothing else known yet.
    fn at(name: &str, per_user_limit: Option<u32>, rate: f64, bases: [f64; 3]) -> Self {
        let [vs_http, vs_redis, vs_postgres] = bases.map(|b| round(rate / b.max(1e-9)));
        Self {
            name: name.to_owned(),
            per_user_limit,
            ops_per_sec: round(rate),
            ok_per_sec: round(rate),
            p50_ms: 0.0,
            p99_ms: 0.0,
            vs_http,
            vs_redis,
            vs_postgres,
            history_ok: None,
            oversold: None,
            mean_group: None,
            reaper_lag_ms: None,
            errors: BTreeMap::new(),
            cpu_us: BTreeMap::new(),
            redis_us: BTreeMap::new(),
            writer_batch: None,
        }
    }
}

impl BenchRow {
    /// A wrk figure of `rate` requests per second over `bases`; the CPU
    /// of every group but the client's.
    fn of_wrk(
        name: &str,
        per_user_limit: Option<u32>,
        rate: f64,
        bases: [f64; 3],
        cpu: &cpu::Window,
    ) -> Self {
        let mut cpu_us = cpu.per_op_us((rate * cpu.seconds()) as u64);
        cpu_us.remove("client");
        let ops = (rate * cpu.seconds()) as u64;
        Self {
            cpu_us,
            redis_us: cpu.redis_per_op_us(ops),
            ..Self::at(name, per_user_limit, rate, bases)
        }
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The CPU table: µs of CPU per operation, by process group, and their
/// sum.
fn render_cpu(rows: &[BenchRow]) -> String {
    let mut out = format!("{:<18} {:>5}", "cpu µs/op", "limit");
    for group in cpu::names() {
        out.push_str(&format!(" {group:>9}"));
    }
    out.push_str(&format!(
        " {:>9} │ {:>9} {:>9} {:>6}\n",
        "total", "r:script", "r:writer", "batch"
    ));
    for r in rows {
        let limit = r.per_user_limit.map_or("-".to_owned(), |l| l.to_string());
        out.push_str(&format!("{:<18} {limit:>5}", r.name));
        for group in cpu::names() {
            match r.cpu_us.get(group) {
                Some(us) => out.push_str(&format!(" {us:>9.1}")),
                None => out.push_str(&format!(" {:>9}", "-")),
            }
        }
        let total: f64 = r.cpu_us.values().sum();
        out.push_str(&format!(" {total:>9.1} │"));
        for part in commands::names() {
            match r.redis_us.get(part) {
                Some(us) => out.push_str(&format!(" {us:>9.1}")),
                None => out.push_str(&format!(" {:>9}", "-")),
            }
        }
        let batch = r.writer_batch.map_or("-".to_owned(), |b| format!("{b:.0}"));
        out.push_str(&format!(" {batch:>6}\n"));
    }
    out
}

/// The rows as an aligned table.
fn render(rows: &[BenchRow]) -> String {
    let mut out = format!(
        "{:<18} {:>5} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}  errors\n",
        "figure",
        "limit",
        "ops/s",
        "ok/s",
        "p50_ms",
        "p99_ms",
        "×http",
        "×redis",
        "×pg",
        "history",
        "group"
    );
    for r in rows {
        let limit = r.per_user_limit.map_or("-".to_owned(), |l| l.to_string());
        let history = match r.history_ok {
            Some(true) => "ok",
            Some(false) => "FAIL",
            None => "-",
        };
        let mut errors: Vec<String> = r.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if let Some(lag) = r.reaper_lag_ms {
            errors.push(format!("(reapers {lag:.0} ms behind due)"));
        }
        let group = r.mean_group.map_or("-".to_owned(), |g| format!("{g:.1}"));
        out.push_str(&format!(
            "{:<18} {:>5} {:>10.0} {:>10.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>6}  {}\n",
            r.name,
            limit,
            r.ops_per_sec,
            r.ok_per_sec,
            r.p50_ms,
            r.p99_ms,
            r.vs_http,
            r.vs_redis,
            r.vs_postgres,
            history,
            group,
            errors.join(" ")
        ));
    }
    out
}
