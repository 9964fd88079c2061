//! `lease-expiry`: 500 ms of work under a 150 ms lease. The plain leases
//! (`setnx-naive`, `redis-lock`, and `db-lock-table`'s stale-row takeover,
//! which is a lease too) let a second buyer in and oversell; the watchdog,
//! the fence, ZooKeeper's sessions and the database's own locks do not.

use serde_json::json;

use super::{Case, Ctx, Expect, ScenarioRow};
use crate::race::client::Target;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let lab = ctx.lab(2).await?;
    let result = async {
        let gateway = Target::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        // The watchdog renews every 50 ms: a loaded machine would have to
        // stall it for 100 ms to break redisson, which is the
        // frozen-holder scenario's job, not this one's.
        let settings = json!({"work_ms": 500, "lease_ms": 150});
        let cases = [
            ("setnx-naive", Expect::Oversells),
            ("redis-lock", Expect::Oversells),
            ("db-lock-table", Expect::Oversells),
            ("redisson", Expect::SellsAll),
            ("fenced", Expect::NoOversell),
            ("zookeeper", Expect::SellsAll),
            ("db-pessimistic", Expect::SellsAll),
            ("db-optimistic", Expect::NoOversell),
            ("db-atomic", Expect::SellsAll),
        ];
        let mut rows = Vec::new();
        for (strategy, expect) in cases {
            // Arrivals 50 ms apart over 2 s: buyers keep coming after each
            // lease has run out, whatever the machine's speed.
            let case = Case::new("lease-expiry", strategy, 3, 40, expect)
                .settings(settings.clone())
                .paced(50);
            rows.push(ctx.race(&gateway, case).await?);
        }
        Ok(rows)
    }
    .await;
    lab.stop().await;
    result
}
