//! `clock-skew`: a third instance runs with its clock 60 s ahead
//! (libfaketime preloaded, `FAKETIME=+60s`, outside the gateway, on the lab's Redis and
//! PostgreSQL). Judged by its own clock, it would take a product that
//! opens in 3 s for open and sell it at once; judged by the shared clock
//! (Redis's, `backends::clock`) it answers `not_started` like the others.
//!
//! Buyers arrive 20 ms apart for 6 s, half before the opening and half
//! after, straight at the skewed instance and through the gateway; the
//! stock is less than the buyers after the opening, so it sells out. A
//! row meets its expectation when no sale was answered before the
//! opening (by the driver's clock, the machine's), early buyers were
//! told `not_started`, and every unit sold after it.

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::{Settings, now_ms};

/// How far ahead the third instance's clock runs.
const AHEAD: &str = "+60s";
/// The opening, after the reset.
const OPENS_IN_MS: u64 = 3_000;
/// Buyers, one every [`PACE_MS`]: 6 s of arrivals.
const BUYERS: usize = 300;
const PACE_MS: u64 = 20;
/// Units: fewer than the buyers after the opening.
const STOCK: i64 = 50;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let skewed = lab
            .start_outside_instance("instance-ahead", &crate::lab::clock_off(AHEAD)?)
            .await?;
        let token = &lab.info.admin_token;
        let targets = [
            (
                format!("instance clock {AHEAD}"),
                Gateway::new(&skewed.url, token, 64)?,
            ),
            (
                "gateway".to_owned(),
                Gateway::new(&lab.info.gateway_url, token, 64)?,
            ),
        ];
        // Every race at once: each is paced arrivals on its own product,
        // and the window is judged before any strategy runs.
        let mut cases = Vec::new();
        for (variant, target) in &targets {
            // One lock-free strategy and one database one.
            for strategy in ["redis-lua", "db-atomic"] {
                let settings = Settings {
                    opens_at_ms: now_ms() + OPENS_IN_MS,
                    ..Settings::default()
                };
                let case = Case::new(
                    Scenario::ClockSkew,
                    strategy,
                    STOCK,
                    BUYERS,
                    Expect::OpensOnTime,
                )
                .variant(variant)
                .paced(PACE_MS)
                .settings(settings);
                cases.push((target, case));
            }
        }
        let rows = ctx.races_at_once(cases).await?;
        Ok(rows)
    })
    .await
}
