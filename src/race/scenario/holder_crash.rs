//! `holder-crash`: the instance holding the lock is killed with SIGKILL in
//! the middle of its critical section, and the other instance sells the
//! rest. Every lock recovers — a lease runs out, ZooKeeper ends the dead
//! session, a lock row goes stale, PostgreSQL rolls back the dead
//! connection's transaction — except `setnx-naive`: killed between its
//! SETNX and its EXPIRE (`crash_gap_ms` holds that gap open; the other
//! locks ignore it), it leaves a lock without a TTL, and the product
//! stalls. Raced: every strategy whose catalogue entry declares the hazard.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow, buy_in_background, fault, judge, reset};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Hazard, Scenario};
use crate::model::product::Settings;
use crate::race::driver::fire;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let mut rows = Vec::new();
    for (strategy, expect) in ctx.under(Hazard::HolderCrash) {
        // A fresh lab per strategy: the crashed instance stays dead.
        let row = ctx
            .with_lab(LabArgs::with_instances(2), async |ctx, lab| {
                let product = ctx.product();
                let token = &lab.info.admin_token;
                let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
                let b = Gateway::new(&lab.info.instances[1].url, token, 8)?;
                let settings = Settings {
                    work_ms: 500,
                    lease_ms: 1000,
                    acquire_timeout_ms: 8000,
                    crash_gap_ms: 2000,
                    ..Settings::default()
                };
                reset(&b, product, strategy, 5, settings).await?;
                let started = Instant::now();
                let victim = buy_in_background(&a, product, "crashing-buyer");
                tokio::time::sleep(Duration::from_millis(200)).await;
                fault(lab, &lab.info.instances[0].name, Signal::SIGKILL)?;
                let mut outcomes = vec![victim.await?];
                outcomes.extend(fire(&b, product, "survivor", 30, 5, None).await);
                let row = ctx.scripted_row(&b, product, &outcomes, started).await?;
                Ok(judge(row, Scenario::HolderCrash, "", expect))
            })
            .await?;
        rows.push(row);
    }
    Ok(rows)
}
