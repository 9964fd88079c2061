//! `redis-crash`: the main Redis is killed (SIGKILL) in the middle of a
//! sale and started again from its own files, under each persistence
//! setting; raced: every safe strategy whose stock lives in Redis (from
//! the catalogue).
//!
//! The script makes what a crash can lose deterministic. PostgreSQL is
//! frozen first (SIGSTOP to the postmaster and every backend), and each instance's
//! order writer is handed one decoy order (on another product), which it
//! reads out of the stream and then waits on PostgreSQL with. With every
//! writer stuck, the first buyers' orders live in the stream alone when
//! Redis dies. (Measured without the decoys: an order a writer had already
//! read survived in its memory and reached PostgreSQL after all, so the
//! loss depended on timing.) After the restart PostgreSQL resumes and more
//! buyers come.
//!
//! Expected, from the mechanism (a process crash: the kernel keeps what
//! Redis wrote to its files, whether or not it was fsynced; Redis 7.0's
//! `flushAppendOnlyFile` in aof.c and `beforeSleep` in server.c):
//! - AOF `always` (durable): the buffer is written and fsynced before
//!   any reply goes out, so nothing acknowledged is lost, no unit is sold
//!   twice, and the rest of the stock sells after the restart.
//! - AOF `everysec` (relaxed): the buffer is written before the replies
//!   unless a background fsync is still running; then the write is
//!   postponed for one to two seconds (`server.unixtime -
//!   aof_flush_postponed_start < 2`) while the replies go out, and a
//!   SIGKILL in that window loses acknowledged sales (their units then
//!   sell again). On an idle disk the fsync takes milliseconds and the
//!   window is rarely hit; on a busy one it is (seen once in two runs on
//!   a loaded machine). So: no loss, or a loss of sales acknowledged in
//!   the last two seconds. `slow-disk` makes the window certain.
//! - no persistence: Redis comes back empty. Every acknowledged sale still
//!   in the stream is gone (`ok_without_order` counts them), and with the
//!   stock and the reset's epoch gone nothing more sells; no unit is sold
//!   twice, because nothing restores an older stock.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow};
use crate::lab::client::Gateway;
use crate::lab::durability::Durability;
use crate::lab::{Lab, LabArgs, LabShape};
use crate::model::info::Scenario;
use crate::model::product::Settings;
use crate::orders::life::reconcile::Drift;
use crate::race::driver::{Attempt, Row, fire, reset};

/// Units on sale; the first wave buys half of them before the crash.
pub(super) const STOCK: i64 = 20;
/// Buyers before the crash (each buys one unit).
const BEFORE: usize = 10;
/// Buyers after the restart: enough for the rest, and some to be refused.
const AFTER: usize = 20;
/// Long enough for an idle writer (blocked 100 ms at a time on the
/// stream) to read a new entry.
const WRITER_PICKS_UP: Duration = Duration::from_millis(300);

/// What a crash may do to acknowledged sales.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Loss {
    /// Nothing acknowledged is lost; the rest sells after the restart.
    None,
    /// Acknowledged sales may be lost, and their units sold again.
    Some,
    /// Every acknowledged sale of the first wave is lost, and the units
    /// sell again after the restart.
    Wave,
    /// Every acknowledged sale is lost, and nothing sells after.
    All,
}

impl Loss {
    /// The expectation's words and whether `crash` meets it.
    pub(super) fn judge(self, crash: &Crash) -> (&'static str, bool) {
        let row = &crash.row;
        let lost = row.violations.get("ok_without_order").copied().unwrap_or(0);
        let twice =
            row.oversold as u64 + row.violations.get("duplicate_unit").copied().unwrap_or(0);
        match self {
            Self::None => (
                "keeps every acknowledged sale, sells the rest after the restart",
                crash.acknowledged > 0 && lost == 0 && twice == 0 && row.sold == STOCK,
            ),
            Self::Some => (
                "keeps every acknowledged sale unless a background fsync was running: then loses those of the last two seconds",
                lost <= crash.acknowledged && twice <= lost && (lost > 0 || row.sold == STOCK),
            ),
            Self::Wave => (
                "loses every sale of the first wave although each was acknowledged; their units sell again after the restart",
                crash.acknowledged > 0
                    && lost == crash.acknowledged
                    && twice <= lost
                    && row.sold == STOCK,
            ),
            Self::All => (
                "loses every acknowledged sale still in Redis; sells nothing after",
                lost == crash.acknowledged && twice == 0 && crash.sold_after == 0,
            ),
        }
    }
}

/// The persistence variants: name, the lab's mode, what a SIGKILL loses.
const VARIANTS: [(&str, Durability, Loss); 3] = [
    ("aof-always", Durability::Durable, Loss::None),
    ("aof-everysec", Durability::Relaxed, Loss::Some),
    ("none", Durability::Fast, Loss::All),
];

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let strategies = ctx.safe_in_redis();
    let mut rows = Vec::new();
    for (variant, durability, loss) in VARIANTS {
        let topology = LabArgs::with_shape(LabShape {
            durability,
            ..LabShape::with_instances(2)
        });
        let found = ctx
            .with_lab(topology, async |ctx, lab| {
                let crashes = crash_mid_sale(ctx, lab, &strategies, variant, None).await?;
                Ok(crashes
                    .into_iter()
                    .map(|crash| crash.judged(Scenario::RedisCrash, variant, loss))
                    .collect::<Vec<_>>())
            })
            .await?;
        rows.extend(found);
    }
    Ok(rows)
}

/// One sale cut in two by a SIGKILL of the main Redis.
pub(super) struct Crash {
    /// The drained ledger, the answers and the history check.
    pub row: Row,
    /// 200s before the crash.
    pub acknowledged: u64,
    /// 200s after the restart.
    pub sold_after: u64,
    /// What reconciliation found after the race, and repaired.
    pub reconciled: Option<Drift>,
}

impl Crash {
    /// The row, judged by what `loss` allows; any other broken rule of
    /// the history fails it too.
    pub(super) fn judged(self, scenario: Scenario, variant: &str, loss: Loss) -> ScenarioRow {
        let (expected, met) = loss.judge(&self);
        let truthful_otherwise = self.row.violations.keys().all(|k| {
            k == "ok_without_order"
                || (matches!(loss, Loss::Some | Loss::Wave) && k == "duplicate_unit")
                || !crate::judge::check::UNIVERSAL.contains(&k.as_str())
        });
        ScenarioRow {
            met: met && truthful_otherwise,
            expected: expected.to_owned(),
            scenario: scenario.name().to_owned(),
            variant: variant.to_owned(),
            row: self.row,
            masters: Vec::new(),
            cut: None,
            reconciled: self.reconciled,
            slowdown: None,
            window: None,
        }
    }
}

/// Sells half the stock of a fresh product per strategy, every product
/// at once, with every order writer stuck (see the module's header),
/// kills the main Redis once, starts it again from its files and sells
/// the rest of every product at once: one crash for every strategy, as a
/// crash of the machine's one Redis is. With `slow`, every fsync under
/// Redis's data takes that long from before the first wave, and the wave
/// waits (up to a few seconds) for a background fsync to be running: the
/// window in which `everysec` answers before it writes. One crash per
/// strategy measured the same per row (docs/scenarios.md's tables were
/// made that way before) and took 3 s a strategy.
pub(super) async fn crash_mid_sale(
    ctx: &mut Ctx,
    lab: &mut Lab,
    strategies: &[&'static str],
    variant: &str,
    slow: Option<Duration>,
) -> anyhow::Result<Vec<Crash>> {
    let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
    let mut products = Vec::new();
    for strategy in strategies {
        let product = ctx.product();
        reset(&gateway, product, strategy, STOCK, Settings::default()).await?;
        products.push(product);
    }
    let decoy = ctx.product();
    reset(&gateway, decoy, "redis-lua", 100, Settings::default()).await?;
    let started = Instant::now();
    eprintln!(
        "  {variant}: {} strategies, PostgreSQL frozen, first wave",
        strategies.len()
    );
    if slow.is_some() {
        lab.slow_fsync("redis", slow)?;
    }
    lab.signal_tree("postgres", Signal::SIGSTOP)?;
    for i in 0..lab.info.instances.len() {
        // One decoy per writer: the next idle writer reads it and blocks
        // on the frozen database.
        let _ = gateway.answer(decoy, &format!("decoy-{i}")).await;
        tokio::time::sleep(WRITER_PICKS_UP).await;
    }
    if slow.is_some() {
        wait_for_fsync(lab).await;
    }
    let waves = products
        .iter()
        .map(|product| fire(&gateway, *product, "before", BEFORE, 4, None));
    let befores = futures::future::join_all(waves).await;
    eprintln!(
        "  {variant}: the first waves answered in {:.2} s; Redis killed",
        started.elapsed().as_secs_f64()
    );
    lab.signal("redis", Signal::SIGKILL)?;
    if slow.is_some() {
        lab.slow_fsync("redis", None)?;
    }
    lab.restart("redis").await?;
    lab.signal_tree("postgres", Signal::SIGCONT)?;
    let waves = products
        .iter()
        .map(|product| fire(&gateway, *product, "after", AFTER, 4, None));
    let afters = futures::future::join_all(waves).await;
    let mut crashes = Vec::new();
    for ((product, mut attempts), after) in products.into_iter().zip(befores).zip(afters) {
        let acknowledged = ok_count(&attempts);
        let sold_after = ok_count(&after);
        attempts.extend(after);
        let row = ctx
            .scripted_row(&gateway, product, &attempts, started)
            .await?;
        let reconciled = gateway.reconcile(true, Some(product)).await?.pop();
        crashes.push(Crash {
            row,
            acknowledged,
            sold_after,
            reconciled,
        });
    }
    Ok(crashes)
}

/// Waits until Redis is inside a slow fsync, for at most three seconds
/// (with `always` no background fsync runs: the main thread fsyncs, and
/// nothing waits once it has answered).
async fn wait_for_fsync(lab: &Lab) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while lab.slow_fsyncs_waiting() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many of `attempts` were told "sold".
pub(super) fn ok_count(attempts: &[Attempt]) -> u64 {
    attempts.iter().filter(|a| a.answer.status == 200).count() as u64
}
