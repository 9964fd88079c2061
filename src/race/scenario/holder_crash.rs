//! `holder-crash`: the instance holding the lock is killed with SIGKILL in
//! the middle of its critical section, and the other instance sells the
//! rest. Every lock recovers — a lease runs out, ZooKeeper ends the dead
//! session, a lock row goes stale, PostgreSQL rolls back the dead
//! connection's transaction — except `setnx-naive`: killed between its
//! SETNX and its EXPIRE (`crash_gap_ms` holds that gap open), it leaves a
//! lock without a TTL, and the product stalls.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::json;

use super::{
    Ctx, Expect, ScenarioRow, buy_in_background, buy_many, fault, judge, reset, scripted_row,
};
use crate::race::client::Target;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let cases = [
        ("redis-lock", Expect::SellsAll),
        ("redisson", Expect::SellsAll),
        ("fenced", Expect::SellsAll),
        ("redlock", Expect::SellsAll),
        ("zookeeper", Expect::SellsAll),
        ("db-lock-table", Expect::SellsAll),
        ("db-pessimistic", Expect::SellsAll),
        ("setnx-naive", Expect::Stalls),
    ];
    let mut rows = Vec::new();
    for (strategy, expect) in cases {
        // A fresh lab per strategy: the crashed instance stays dead.
        let lab = ctx.lab(2).await?;
        let product = ctx.product();
        let result = async {
            let token = &lab.info.admin_token;
            let a = Target::new(&lab.info.instances[0].url, token, 8)?;
            let b = Target::new(&lab.info.instances[1].url, token, 8)?;
            let settings = json!({
                "work_ms": 500,
                "lease_ms": 1000,
                "acquire_timeout_ms": 8000,
                "crash_gap_ms": if strategy == "setnx-naive" { 2000 } else { 0 },
            });
            reset(&b, product, strategy, 5, &settings).await?;
            let started = Instant::now();
            let victim = buy_in_background(&a, product, "crashing-buyer");
            tokio::time::sleep(Duration::from_millis(200)).await;
            fault(&lab, &lab.info.instances[0].name, Signal::SIGKILL)?;
            let mut outcomes = vec![victim.await?];
            outcomes.extend(buy_many(&b, product, "survivor", 30, 5).await);
            let row = scripted_row(&b, product, strategy, &outcomes, started).await?;
            Ok::<_, anyhow::Error>(judge(row, "holder-crash", "", expect))
        }
        .await;
        lab.stop().await;
        rows.push(result?);
    }
    Ok(rows)
}
