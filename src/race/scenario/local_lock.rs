//! `two-instances-local-lock`: an in-process mutex is safe on one instance
//! and oversells on two. 20 ms of work inside the section makes the two
//! instances' sections overlap on every run.

use serde_json::json;

use super::{Case, Ctx, Expect, ScenarioRow};
use crate::race::client::Target;

const NAME: &str = "two-instances-local-lock";

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let lab = ctx.lab(2).await?;
    let result = async {
        let token = &lab.info.admin_token;
        let one = Target::new(&lab.info.instances[0].url, token, 64)?;
        let both = Target::new(&lab.info.gateway_url, token, 64)?;
        let settings = json!({"work_ms": 20});
        let single = Case::new(NAME, "local-mutex", 20, 100, Expect::SellsAll)
            .variant("instances=1")
            .settings(settings.clone());
        let double = Case::new(NAME, "local-mutex", 20, 100, Expect::Oversells)
            .variant("instances=2")
            .settings(settings);
        Ok(vec![
            ctx.race(&one, single).await?,
            ctx.race(&both, double).await?,
        ])
    }
    .await;
    lab.stop().await;
    result
}
