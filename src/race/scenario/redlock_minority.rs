//! `redlock-minority-down`: one of the three RedLock masters is stopped.
//! With a majority quorum `redlock` keeps selling, oversell 0; with
//! `quorum: "all"` (the articles' MultiLock) no lock can be taken and every
//! buyer is turned away as `busy` — nothing sold, nothing oversold.

use nix::sys::signal::Signal;
use serde_json::json;

use super::{Case, Ctx, Expect, ScenarioRow, fault};
use crate::race::client::Target;

const NAME: &str = "redlock-minority-down";

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let lab = ctx.lab(2).await?;
    let result = async {
        let gateway = Target::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        fault(&lab, "redis-3", Signal::SIGKILL)?;
        let majority =
            Case::new(NAME, "redlock", 20, 100, Expect::SellsAll).variant("quorum=majority");
        let all = Case::new(NAME, "redlock", 20, 100, Expect::Stalls)
            .variant("quorum=all")
            .settings(json!({"quorum": "all", "acquire_timeout_ms": 300}));
        Ok(vec![
            ctx.race(&gateway, majority).await?,
            ctx.race(&gateway, all).await?,
        ])
    }
    .await;
    lab.stop().await;
    result
}
