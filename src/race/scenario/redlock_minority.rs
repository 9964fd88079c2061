//! `redlock-minority-down`: one of the three RedLock masters is killed.
//! With a majority quorum `redlock` keeps selling, oversell 0; with
//! `quorum: "all"` (the articles' MultiLock) no lock can be taken and every
//! buyer is turned away as `busy` — nothing sold, nothing oversold. Raced:
//! every strategy whose catalogue entry declares the hazard.

use nix::sys::signal::Signal;

use super::{Case, Ctx, ScenarioRow, fault};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::{Quorum, Settings};

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        fault(lab, "redis-3", Signal::SIGKILL)?;
        let all = Settings {
            quorum: Quorum::All,
            acquire_timeout_ms: 300,
            ..Settings::default()
        };
        let mut rows = Vec::new();
        for (strategy, expect) in ctx.under(Hazard::MinorityDown) {
            let majority = Case::new(Scenario::RedlockMinorityDown, strategy, 20, 100, expect)
                .variant("quorum=majority");
            rows.push(ctx.race(&gateway, majority).await?);
            // Requiring every master, one down is no lock at all.
            let every = Case::new(
                Scenario::RedlockMinorityDown,
                strategy,
                20,
                100,
                Expect::Stalls,
            )
            .variant("quorum=all")
            .settings(all);
            rows.push(ctx.race(&gateway, every).await?);
        }
        Ok(rows)
    })
    .await
}
