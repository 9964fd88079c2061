//! `segment-scaling`: `segmented` with 1, 2, 4 and 8 segments against
//! `redis-lock` (the same lease lock on one key), all with 50 ms of work per
//! sale, so the simulated work — not the machine — sets the pace. One lock
//! serialises every sale; K segments sell K at a time. Expected: no
//! oversell anywhere, and 8 segments at least 4 times the throughput of
//! one, measured in the same run.
//!
//! The instances' adaptive limit is off here (`SECKILL_EDGE_OFF=adaptive`):
//! 80 buyers queued behind one 50 ms section wait up to 4 s by design,
//! which is exactly the pile-up the limit refuses (10 of the 80 were told
//! `busy` with it on), and the question here is the locks' throughput.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::Settings;

/// The speed-up 8 segments must reach over one.
pub const MIN_SPEEDUP: f64 = 4.0;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        instance_env: vec![("SECKILL_EDGE_OFF".to_owned(), "adaptive".to_owned())],
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 80)?;
        let base = Settings {
            work_ms: 50,
            acquire_timeout_ms: 30_000,
            ..Settings::default()
        };
        let lock = Case::new(
            Scenario::SegmentScaling,
            "redis-lock",
            80,
            80,
            Expect::SellsAll,
        )
        .settings(base);
        let mut rows = vec![ctx.race(&gateway, lock).await?];
        for segments in [1, 2, 4, 8] {
            let variant = format!("segments={segments}");
            let case = Case::new(
                Scenario::SegmentScaling,
                "segmented",
                80,
                80,
                Expect::SellsAll,
            )
            .variant(&variant)
            .settings(Settings { segments, ..base });
            rows.push(ctx.race(&gateway, case).await?);
        }
        let one = rows[1].row.rps;
        let eight = rows.last_mut().expect("the 8-segment row");
        eight.expected = format!("{}; rps >= {MIN_SPEEDUP}x segments=1", eight.expected);
        eight.met = eight.met && eight.row.rps >= MIN_SPEEDUP * one;
        Ok(rows)
    })
    .await
}
