//! `slow-disk`: every fsync under Redis's data made slow (2.5 s, longer
//! than the two seconds Redis waits), then the staging of `redis-crash`:
//! writers stuck, a first wave of sales while a background fsync runs, a
//! SIGKILL of Redis, a restart from its files, a second wave. The lab's
//! data is on the power-cut filesystem, which makes the fsync slow and
//! says when one is running; nothing here cuts power — the kernel keeps
//! every byte Redis wrote.
//!
//! Expected, from Redis 7.0's `flushAppendOnlyFile` (aof.c), written
//! before running:
//! - AOF `everysec` (the lab's `relaxed`): the first wave's writes land
//!   while `aofFsyncInProgress()` holds, so the write of the AOF buffer is
//!   postponed (for one to two seconds) and `beforeSleep` sends the
//!   replies anyway; the SIGKILL comes within milliseconds of the wave,
//!   inside the window, so every sale of the first wave is acknowledged
//!   and lost, in every run, and nothing is sold twice only because the
//!   stuck writers never moved those orders to PostgreSQL.
//! - AOF `always` (the lab's `durable`): the main thread writes and
//!   fsyncs before any reply goes out, so a slow fsync makes buyers wait
//!   and loses nothing acknowledged. Its disk is slowed to 200 ms: a
//!   buyer waits for the fsync under way and then its own, inside the
//!   500 ms the buy path gives Redis to answer (redis-rs's default
//!   response timeout, `DEFAULT_RESPONSE_TIMEOUT` in its client.rs). At
//!   1 s or 2.5 s the blocked main thread outlasts that budget (measured:
//!   the first wave's buyers told 503 `outcome_unknown` or `unavailable`,
//!   none told sold, nothing lost), which says nothing about
//!   acknowledged sales.
//!
//! Raced under `everysec`: every safe strategy whose stock is in Redis
//! (the reported loss was on `etcd`'s row). Under `always`: those that
//! sell from Redis alone, one write per sale — a locked strategy makes
//! three writes in series per sale, each waiting out the slow fsync, and
//! its buyers would mostly time out on the lock; the mechanism that keeps
//! the sale is the same one.

use std::time::Duration;

use super::redis_crash::{Loss, crash_mid_sale};
use super::{Ctx, ScenarioRow};
use crate::lab::durability::Durability;
use crate::lab::{LabArgs, LabShape};
use crate::model::info::Scenario;
use crate::model::product::StoreKind;

/// How long each fsync under Redis's data takes with `everysec`: longer
/// than the two seconds Redis postpones its write.
pub const SLOW_FSYNC: Duration = Duration::from_millis(2500);
/// With `always`: slow, and two of them inside the buy path's 500 ms.
pub const SLOW_FSYNC_ALWAYS: Duration = Duration::from_millis(200);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let everysec = ctx.safe_in_redis();
    let always: Vec<&str> = ctx
        .catalogue
        .all()
        .map(|s| s.info())
        .filter(|info| info.safe && info.stores == [StoreKind::Redis])
        .map(|info| info.id)
        .collect();
    let variants = [
        (
            "aof-everysec",
            Durability::Relaxed,
            Loss::Wave,
            SLOW_FSYNC,
            everysec,
        ),
        (
            "aof-always",
            Durability::Durable,
            Loss::None,
            SLOW_FSYNC_ALWAYS,
            always,
        ),
    ];
    let mut rows = Vec::new();
    for (variant, durability, loss, delay, strategies) in variants {
        let topology = LabArgs {
            power_cut_fs: true,
            ..LabArgs::with_shape(LabShape {
                durability,
                ..LabShape::with_instances(2)
            })
        };
        let found = ctx
            .with_lab(topology, async |ctx, lab| {
                let crashes = crash_mid_sale(ctx, lab, &strategies, variant, Some(delay)).await?;
                Ok(crashes
                    .into_iter()
                    .map(|crash| crash.judged(Scenario::SlowDisk, variant, loss))
                    .collect::<Vec<_>>())
            })
            .await?;
        rows.extend(found);
    }
    Ok(rows)
}
