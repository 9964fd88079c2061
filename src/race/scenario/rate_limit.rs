//! `rate-limit`: the edge at work. The gateway's leaky bucket and the
//! instances' token buckets are tightened far below what the driver sends
//! (everything from 127.0.0.1), so both layers answer 429. The row counts
//! `rate_limited:gateway` and `rate_limited:service` apart from the sales
//! (the layer is named by the `X-Limited-By` header), and the sales that do
//! get through still never oversell.
//!
//! The limits are chosen so the outcome does not depend on the machine's
//! speed: 1000 buyers arrive over 2 s; nginx admits 20 + 100/s of them, and
//! each of the two instances gets half of that but admits only 5 + 20/s, so
//! both layers refuse some requests however slow the machine is (up to a
//! race of ~10 s).

use super::{Case, Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::lab::nginx::GatewayLimits;
use crate::model::info::{Expect, Scenario};
use crate::model::product::Settings;

/// nginx: requests per second per address, and the burst.
const GATEWAY: (u32, u32) = (100, 20);
/// Each instance: buys per second per client, and the bucket.
const SERVICE: (u32, u32) = (20, 5);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        gateway: GatewayLimits {
            gateway_rate: GATEWAY.0,
            gateway_burst: GATEWAY.1,
            ..Default::default()
        },
        instance_env: vec![
            ("SECKILL_RATE_PER_SEC".to_owned(), SERVICE.0.to_string()),
            ("SECKILL_RATE_BURST".to_owned(), SERVICE.1.to_string()),
        ],
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let target = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        let variant = format!("gw={}/s svc={}/s", GATEWAY.0, SERVICE.0);
        let mut rows = Vec::new();
        // One lock-free and one locked strategy: the edge is in front of
        // both, whatever sells behind it.
        for strategy in ["redis-lua", "redis-lock"] {
            // Bucket refill between races: each starts with full buckets.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            // 1000 buyers arriving over 2 s: a sustained flood, so the
            // rates (not just the bursts) show in the counts.
            let settings = Settings {
                work_ms: 1,
                ..Settings::default()
            };
            let case = Case::new(Scenario::RateLimit, strategy, 100, 1000, Expect::Throttled)
                .variant(&variant)
                .paced(2)
                .settings(settings);
            rows.push(ctx.race(&target, case).await?);
        }
        Ok(rows)
    })
    .await
}
