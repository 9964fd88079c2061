//! `lease-expiry`: 500 ms of work under a 150 ms lease. The plain leases
//! (`setnx-naive`, `redis-lock`, `redlock`, the segment locks, and
//! `db-lock-table`'s stale-row takeover, which is a lease too) let a second
//! buyer in and oversell; the watchdog, the fence, ZooKeeper's sessions and
//! the database's own locks do not. Raced: every strategy whose catalogue
//! entry declares the hazard, expected to do what it declares.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::Settings;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        // The watchdog renews every 50 ms: a loaded machine would have to
        // stall it for 100 ms to break redisson, which is the
        // frozen-holder scenario's job, not this one's.
        let settings = Settings {
            work_ms: 500,
            lease_ms: 150,
            ..Settings::default()
        };
        // Arrivals 50 ms apart over 2 s: buyers keep coming after each
        // lease has run out, whatever the machine's speed. The races that
        // must oversell run at once, then those that must not, at once:
        // paced arrivals mostly wait, and a strategy that holds does not
        // share the instances with the oversellers' pile of sections (12
        // races one after another took 30 s).
        let (oversell, hold): (Vec<_>, Vec<_>) = ctx
            .under(Hazard::LeaseExpiry)
            .into_iter()
            .partition(|(_, expect)| *expect == Expect::Oversells);
        let mut rows = Vec::new();
        for batch in [oversell, hold] {
            let cases = batch
                .into_iter()
                .map(|(strategy, expect)| {
                    let case = Case::new(Scenario::LeaseExpiry, strategy, 3, 40, expect)
                        .settings(settings)
                        .paced(50);
                    (&gateway, case)
                })
                .collect();
            rows.extend(ctx.races_at_once(cases).await?);
        }
        Ok(rows)
    })
    .await
}
