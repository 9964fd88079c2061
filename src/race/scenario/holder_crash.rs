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
    let under = ctx.under(Hazard::HolderCrash);
    // One lab and one crash for all: each strategy sells its own product,
    // and every holder is inside its critical section on instance a when
    // a dies (each acquires within the first 300 ms of its 500 ms of work,
    // setnx-naive inside its 2 s gap).
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let token = &lab.info.admin_token;
        let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
        let b = Gateway::new(&lab.info.instances[1].url, token, 64)?;
        let settings = Settings {
            work_ms: 500,
            lease_ms: 1000,
            acquire_timeout_ms: 8000,
            crash_gap_ms: 2000,
            ..Settings::default()
        };
        let mut products = Vec::new();
        for (strategy, expect) in under {
            let product = ctx.product();
            reset(&b, product, strategy, 5, settings).await?;
            products.push((product, expect));
        }
        let started = Instant::now();
        let victims: Vec<_> = products
            .iter()
            .map(|(product, _)| buy_in_background(&a, *product, "crashing-buyer"))
            .collect();
        tokio::time::sleep(Duration::from_millis(300)).await;
        fault(lab, &lab.info.instances[0].name, Signal::SIGKILL)?;
        // The survivors of every product at once: each waits for its own
        // lock to recover, none for another's.
        let fired = products
            .iter()
            .map(|(product, _)| fire(&b, *product, "survivor", 30, 5, None));
        let fired = futures::future::join_all(fired).await;
        let mut rows = Vec::new();
        for (((product, expect), victim), survivors) in products.into_iter().zip(victims).zip(fired)
        {
            let mut outcomes = vec![victim.await?];
            outcomes.extend(survivors);
            let row = ctx.scripted_row(&b, product, &outcomes, started).await?;
            rows.push(judge(row, Scenario::HolderCrash, "", expect));
        }
        Ok(rows)
    })
    .await
}
