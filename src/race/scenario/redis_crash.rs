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
//! Redis wrote to its files, whether or not it was fsynced):
//! - AOF (`always` or `everysec`): Redis appends every write to the AOF
//!   before it answers the client, so nothing acknowledged is lost, no
//!   unit is sold twice, and the rest of the stock sells after the
//!   restart. (`everysec` would lose up to a second of acknowledged
//!   writes in a crash of the machine, which no process signal can stage;
//!   docs/scenarios.md says so.)
//! - no persistence: Redis comes back empty. Every acknowledged sale still
//!   in the stream is gone (`ok_without_order` counts them), and with the
//!   stock and the reset's epoch gone nothing more sells; no unit is sold
//!   twice, because nothing restores an older stock.

use std::time::Instant;

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow};
use crate::info::Scenario;
use crate::lab::LabArgs;
use crate::lab::durability::{AofFsync, Durability};
use crate::product::Settings;
use crate::race::client::Target;
use crate::race::driver::{Attempt, fire, reset};

/// Units on sale; the first wave buys half of them before the crash.
const STOCK: i64 = 20;
/// Buyers before the crash (each buys one unit).
const BEFORE: usize = 10;
/// Buyers after the restart: enough for the rest, and some to be refused.
const AFTER: usize = 20;
/// Long enough for an idle writer (blocked 100 ms at a time on the
/// stream) to read a new entry.
const WRITER_PICKS_UP: std::time::Duration = std::time::Duration::from_millis(300);

/// The persistence variants: name, mode, AOF policy, and whether
/// acknowledged sales survive a SIGKILL.
const VARIANTS: [(&str, Durability, AofFsync, bool); 3] = [
    ("aof-always", Durability::Durable, AofFsync::Always, true),
    (
        "aof-everysec",
        Durability::Durable,
        AofFsync::Everysec,
        true,
    ),
    ("none", Durability::Fast, AofFsync::Everysec, false),
];

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let strategies = ctx.safe_in_redis();
    let mut rows = Vec::new();
    for (variant, durability, redis_fsync, survives) in VARIANTS {
        let topology = LabArgs {
            durability,
            redis_fsync,
            ..LabArgs::with_instances(2)
        };
        let found = ctx
            .with_lab(topology, async |ctx, lab| {
                let gateway = Target::new(&lab.info.gateway_url, &lab.info.admin_token, 8)?;
                let mut rows = Vec::new();
                for strategy in &strategies {
                    let product = ctx.product();
                    reset(&gateway, product, strategy, STOCK, Settings::default()).await?;
                    let decoy = ctx.product();
                    reset(&gateway, decoy, "redis-lua", 100, Settings::default()).await?;
                    let started = Instant::now();
                    eprintln!("  {strategy} ({variant}): PostgreSQL frozen, first wave");
                    lab.signal_tree("postgres", Signal::SIGSTOP)?;
                    for i in 0..lab.info.instances.len() {
                        // One decoy per writer: the next idle writer reads
                        // it and blocks on the frozen database.
                        let _ = gateway.answer(decoy, &format!("decoy-{i}")).await;
                        tokio::time::sleep(WRITER_PICKS_UP).await;
                    }
                    let mut attempts = fire(&gateway, product, "before", BEFORE, 4, None).await;
                    let acknowledged = ok_count(&attempts);
                    lab.signal("redis", Signal::SIGKILL)?;
                    lab.restart("redis").await?;
                    lab.signal_tree("postgres", Signal::SIGCONT)?;
                    let after = fire(&gateway, product, "after", AFTER, 4, None).await;
                    let sold_after = ok_count(&after);
                    attempts.extend(after);
                    let row = ctx
                        .scripted_row(&gateway, product, &attempts, started)
                        .await?;
                    let lost = row.violations.get("ok_without_order").copied().unwrap_or(0);
                    let twice = row.oversold as u64
                        + row.violations.get("duplicate_unit").copied().unwrap_or(0);
                    let (expected, met) = if survives {
                        (
                            "keeps every acknowledged sale, sells the rest after the restart",
                            lost == 0 && twice == 0 && row.sold == STOCK,
                        )
                    } else {
                        (
                            "loses every acknowledged sale still in Redis; sells nothing after",
                            lost == acknowledged && twice == 0 && sold_after == 0,
                        )
                    };
                    let truthful_otherwise = row.violations.keys().all(|k| {
                        k == "ok_without_order" || !crate::check::UNIVERSAL.contains(&k.as_str())
                    });
                    rows.push(ScenarioRow {
                        met: met && truthful_otherwise,
                        expected: expected.to_owned(),
                        scenario: Scenario::RedisCrash.name().to_owned(),
                        variant: variant.to_owned(),
                        row,
                        masters: Vec::new(),
                    });
                }
                Ok(rows)
            })
            .await?;
        rows.extend(found);
    }
    Ok(rows)
}

/// How many of `attempts` were told "sold".
fn ok_count(attempts: &[Attempt]) -> u64 {
    attempts.iter().filter(|a| a.answer.status == 200).count() as u64
}
