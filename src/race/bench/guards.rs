//! `seckill bench --guards`: what the adaptive limit and the circuit
//! breaker (`sale::guard`) cost a healthy sale, from one run.
//!
//! Two runs of the whole bench, one with the guards and one without,
//! differ by more than the guards: this machine is shared, and the same
//! figure moves ±15 % from one run to the next, three times the 5 % the
//! guards may cost. So one lab holds both: `instance-a` with the guards,
//! `instance-b` with `SECKILL_EDGE_OFF=adaptive,breaker`, on the same
//! backends, selling the same product. The load goes straight to one
//! instance at a time (through nginx it would mix them), in slices
//! alternated a, b, b, a: a drift of the machine's load over the run
//! weighs on both alike. Each slice pair is measured twice, buys and
//! `GET /healthz`: the health route passes no guard, so the two
//! instances' health ratio is how much they differ without the guards in
//! the way (where each landed on the two cores), and the cost is the buy
//! ratio over it. The instance's own CPU per operation, read from
//! `/proc`, says the same from the other side.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{BenchArgs, cpu, load, round};
use crate::lab::client::Gateway;
use crate::lab::{Lab, LabArgs, ProcessInfo};
use crate::model::product::{MAX_STOCK, Settings};
use crate::race::attempt::Attempt;
use crate::race::driver::{Audit, reset, settled_row};
use crate::stock::strategy::Catalogue;

/// The instance with the guards.
const ON: &str = "instance-a";
/// The instance without the guards (`SECKILL_EDGE_OFF`).
pub const OFF: &str = "instance-b";
/// Slices per instance and load, in pairs alternated a, b, then b, a.
pub const ROUNDS: usize = 4;
/// Each slice's unmeasured start: its connections are made anew.
const SLICE_WARMUP: Duration = Duration::from_millis(500);

/// One strategy's comparison.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GuardsRow {
    /// The strategy.
    pub name: String,
    /// Sales per second through the instance with the guards: a buy its
    /// guards answered `busy` is not one (counted as throughput, a
    /// refusal, cheaper than a sale, would flatter the guards).
    pub on_sales_per_sec: f64,
    /// The same without them.
    pub off_sales_per_sec: f64,
    /// Buys the instance with the guards answered with anything but a
    /// sale, by error code (on a healthy sale with stock to spare: the
    /// guards' refusals, or what went wrong).
    pub on_refused: BTreeMap<String, u64>,
    /// The same without them.
    pub off_refused: BTreeMap<String, u64>,
    /// `GET /healthz` per second, with the guards' instance.
    pub health_on: f64,
    /// The same, on the other.
    pub health_off: f64,
    /// Sales on over off, over health on over off: 1 when the guards
    /// cost nothing.
    pub ratio: f64,
    /// µs of the instance's CPU per buy answered, with the guards.
    pub on_cpu_us: f64,
    /// The same without them.
    pub off_cpu_us: f64,
    /// The history check over every buy of both instances.
    pub history_ok: Option<bool>,
    /// Units sold beyond the stock.
    pub oversold: i64,
}

/// What the lab must be for the comparison: `args`' shape, its second
/// instance without the guards.
pub fn lab_args(args: &BenchArgs) -> anyhow::Result<LabArgs> {
    anyhow::ensure!(
        args.lab.instances >= 2,
        "--guards compares two instances: --instances must be at least 2"
    );
    Ok(LabArgs {
        instance_env_of: vec![(
            OFF.to_owned(),
            "SECKILL_EDGE_OFF".to_owned(),
            "adaptive,breaker".to_owned(),
        )],
        ..LabArgs::with_shape(args.lab.clone())
    })
}

/// Every strategy of `args`, on and off.
pub async fn measure(
    args: &BenchArgs,
    lab: &Lab,
    catalogue: &Catalogue,
) -> anyhow::Result<Vec<GuardsRow>> {
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
    let slice = Duration::from_secs(args.duration_secs) / ROUNDS as u32;
    let sides = [side(args, lab, ON)?, side(args, lab, OFF)?];
    for (side, guarded) in sides.iter().zip([true, false]) {
        let off = side.target.config().await?["edge"]["edge_off"].clone();
        let has = |layer: &str| off.as_array().is_some_and(|l| l.iter().any(|v| v == layer));
        anyhow::ensure!(
            has("adaptive") != guarded && has("breaker") != guarded,
            "{} should have its guards {}: edge_off = {off}",
            side.target.base,
            if guarded { "on" } else { "off" }
        );
    }
    let mut rows = Vec::new();
    for (index, strategy) in args.strategies.iter().enumerate() {
        eprintln!("bench: {strategy}, guards on ({ON}) and off ({OFF}), alternated");
        let product = 990_201 + index as i64;
        reset(&sides[0].target, product, strategy, MAX_STOCK, healthy()).await?;
        let (buys, attempts, began) = alternate(&sides, args.concurrency, slice, product).await?;
        let (health, _, _) = alternate(&sides, args.concurrency, slice, 0).await?;
        let row = settled_row(&sides[0].target, &audit, product, &attempts, began).await?;
        let sales = |t: &Tally| t.done as f64 / t.seconds.max(1e-9);
        let rate = |t: &Tally| t.answered() as f64 / t.seconds.max(1e-9);
        let cpu = |t: &Tally| t.cpu_us / t.answered().max(1) as f64;
        let ratio = (sales(&buys[0]) / sales(&buys[1]).max(1e-9))
            / (rate(&health[0]) / rate(&health[1]).max(1e-9)).max(1e-9);
        rows.push(GuardsRow {
            name: strategy.clone(),
            on_sales_per_sec: round(sales(&buys[0])),
            off_sales_per_sec: round(sales(&buys[1])),
            health_on: round(rate(&health[0])),
            health_off: round(rate(&health[1])),
            ratio: (ratio * 1000.0).round() / 1000.0,
            on_cpu_us: round(cpu(&buys[0])),
            off_cpu_us: round(cpu(&buys[1])),
            on_refused: buys[0].errors.clone(),
            off_refused: buys[1].errors.clone(),
            history_ok: row.history_ok,
            oversold: row.oversold,
        });
    }
    Ok(rows)
}

/// A sale with nothing to wait for: no work, no limit per buyer.
fn healthy() -> Settings {
    Settings {
        work_ms: 0,
        ..Settings::default()
    }
}

/// One instance as the load's target, and its process for the CPU.
struct Side {
    target: Gateway,
    groups: cpu::Groups,
}

fn side(args: &BenchArgs, lab: &Lab, name: &str) -> anyhow::Result<Side> {
    let instance = lab
        .info
        .instances
        .iter()
        .find(|i| i.name == name)
        .ok_or_else(|| anyhow::anyhow!("the lab has no {name}"))?;
    let process = ProcessInfo {
        name: instance.name.clone(),
        pid: instance.pid,
    };
    Ok(Side {
        target: Gateway::new(&instance.url, &lab.info.admin_token, args.concurrency)?,
        groups: cpu::Groups::of(&[process], &lab.info.redis_url),
    })
}

/// What one side's slices added up to.
#[derive(Debug, Clone, Default)]
struct Tally {
    /// Those that did what was asked (a sale; a health check).
    done: u64,
    /// The others, by error code.
    errors: BTreeMap<String, u64>,
    seconds: f64,
    /// The instance's CPU over the measured seconds, µs.
    cpu_us: f64,
}

impl Tally {
    /// Operations answered, whatever the answer: every counted one is
    /// done or failed with a code (`load::run_for`).
    fn answered(&self) -> u64 {
        self.done + self.errors.values().sum::<u64>()
    }
}

/// [`ROUNDS`] slices per side, a-b-b-a: buys of `product`, or with
/// product 0 health checks. Each side's operations, measured seconds and
/// CPU; the buys' attempts, and when the first slice began.
async fn alternate(
    sides: &[Side; 2],
    n: usize,
    slice: Duration,
    product: i64,
) -> anyhow::Result<([Tally; 2], Vec<Attempt>, Instant)> {
    let began = Instant::now();
    let mut tallies: [Tally; 2] = Default::default();
    let mut attempts = Vec::new();
    for round in 0..ROUNDS {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for which in order {
            let side = &sides[which];
            let window = (SLICE_WARMUP, slice);
            let (sample, cpu) = if product == 0 {
                let load = load::http(&side.target, n, SLICE_WARMUP, slice);
                let (sample, cpu) = cpu::around(&side.groups, window, load).await;
                (sample?, cpu)
            } else {
                let load = load::buys(&side.target, product, false, n, SLICE_WARMUP, slice);
                let (measured, cpu) = cpu::around(&side.groups, window, load).await;
                let (sample, mine, _) = measured?;
                attempts.extend(mine);
                (sample, cpu)
            };
            let tally = &mut tallies[which];
            tally.done += sample.ok();
            for (code, n) in &sample.errors {
                *tally.errors.entry(code.clone()).or_default() += n;
            }
            tally.seconds += slice.as_secs_f64();
            tally.cpu_us += cpu.per_op_us(1).get("instances").copied().unwrap_or(0.0);
        }
    }
    Ok((tallies, attempts, began))
}

/// The comparison as an aligned table.
pub fn render(rows: &[GuardsRow]) -> String {
    let mut out = format!(
        "{:<14} {:>11} {:>11} {:>11} {:>11} {:>10} {:>10} {:>7} {:>9} {:>9} {:>7} {:>8}\n",
        "guards",
        "on sales/s",
        "off sales/s",
        "on refused",
        "off refused",
        "health on",
        "health off",
        "ratio",
        "on µs/op",
        "off µs/op",
        "history",
        "oversold"
    );
    for r in rows {
        let history = match r.history_ok {
            Some(true) => "ok",
            Some(false) => "FAIL",
            None => "-",
        };
        out.push_str(&format!(
            "{:<14} {:>11.0} {:>11.0} {:>11} {:>11} {:>10.0} {:>10.0} {:>7.3} {:>9.1} {:>9.1} {:>7} {:>8}\n",
            r.name,
            r.on_sales_per_sec,
            r.off_sales_per_sec,
            r.on_refused.values().sum::<u64>(),
            r.off_refused.values().sum::<u64>(),
            r.health_on,
            r.health_off,
            r.ratio,
            r.on_cpu_us,
            r.off_cpu_us,
            history,
            r.oversold
        ));
    }
    for r in rows {
        for (side, refused) in [("on", &r.on_refused), ("off", &r.off_refused)] {
            if !refused.is_empty() {
                out.push_str(&format!("{} refused, guards {side}: {refused:?}\n", r.name));
            }
        }
    }
    out.push_str(
        "ratio: sales on/off over health on/off (1: the guards cost nothing); refused: buys answered anything but a sale; µs/op: per buy answered\n",
    );
    out
}
