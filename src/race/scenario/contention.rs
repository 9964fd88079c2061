//! `contention`: every strategy, default settings, many buyers — the
//! foundation's race. Only the lockless and the process-local strategies
//! may oversell.

use serde_json::json;

use super::{Case, Ctx, Expect, ScenarioRow};
use crate::race::client::Target;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let lab = ctx.lab(2).await?;
    let result = async {
        let gateway = Target::new(
            &lab.info.gateway_url,
            &lab.info.admin_token,
            ctx.knobs.concurrency,
        )?;
        let knobs = ctx.knobs.clone();
        let mut rows = Vec::new();
        for entry in gateway.strategies().await? {
            let expect = match entry.id.as_str() {
                "naive" | "local-mutex" => Expect::Oversells,
                _ => Expect::NoOversell,
            };
            let settings = json!({"work_ms": knobs.work_ms});
            let case = Case::new("contention", &entry.id, knobs.stock, knobs.buyers, expect);
            rows.push(ctx.race(&gateway, case.settings(settings)).await?);
        }
        Ok(rows)
    }
    .await;
    lab.stop().await;
    result
}
