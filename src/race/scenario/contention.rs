//! `contention`: every strategy, default settings, many buyers through two
//! instances — the foundation's race. Each strategy's expectation is its
//! catalogue entry's (only the lockless and the process-local ones
//! oversell). With `--redis-cluster N`, on a Redis Cluster: the same
//! expectations hold there.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Hazard, Scenario};
use crate::model::product::Settings;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        redis_cluster: ctx.knobs.redis_cluster,
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let knobs = ctx.knobs.clone();
        let gateway = Gateway::new(
            &lab.info.gateway_url,
            &lab.info.admin_token,
            knobs.concurrency,
        )?;
        let settings = Settings {
            work_ms: knobs.work_ms,
            ..Settings::default()
        };
        let mut rows = Vec::new();
        for (strategy, expect) in ctx.under(Hazard::Contention) {
            let case = Case::new(
                Scenario::Contention,
                strategy,
                knobs.stock,
                knobs.buyers,
                expect,
            );
            rows.push(ctx.race(&gateway, case.settings(settings)).await?);
        }
        Ok(rows)
    })
    .await
}
