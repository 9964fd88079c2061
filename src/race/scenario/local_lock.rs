//! `two-instances-local-lock`: an in-process mutex is safe on one instance
//! and oversells on two. 20 ms of work inside the section makes the two
//! instances' sections overlap on every run. Raced: every strategy whose
//! catalogue entry declares the second-instance hazard.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::Settings;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let token = &lab.info.admin_token;
        let one = Gateway::new(&lab.info.instances[0].url, token, 64)?;
        let both = Gateway::new(&lab.info.gateway_url, token, 64)?;
        let settings = Settings {
            work_ms: 20,
            ..Settings::default()
        };
        let mut rows = Vec::new();
        for (strategy, on_two) in ctx.under(Hazard::SecondInstance) {
            let single = Case::new(
                Scenario::TwoInstancesLocalLock,
                strategy,
                20,
                100,
                Expect::SellsAll,
            )
            .variant("instances=1")
            .settings(settings);
            rows.push(ctx.race(&one, single).await?);
            let double = Case::new(Scenario::TwoInstancesLocalLock, strategy, 20, 100, on_two)
                .variant("instances=2")
                .settings(settings);
            rows.push(ctx.race(&both, double).await?);
        }
        Ok(rows)
    })
    .await
}
