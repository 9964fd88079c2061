//! `instance-kill`: one of two instances is killed (SIGKILL) at full load
//! behind nginx. Raced: `redis-lua` (its orders in the stream, some
//! delivered to the dead instance's writer and never acknowledged) and
//! `db-atomic` (its sale one statement in PostgreSQL), from the catalogue's
//! own entries for the two kinds of store.
//!
//! Expected, from the mechanism: the buys in flight on the dead instance
//! end in nginx's 502, which says `outcome_unknown` (some did sell before
//! the kill, some did not; the history check counts which). nginx passes a
//! POST to another instance only when the first could not be reached
//! (nothing sent), never after sending it, so no request sells twice
//! (`replayed`). The dead writer's pending stream entries are claimed by
//! the survivor's writer once idle, so every 200 has its order in
//! PostgreSQL in the end. No oversell.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow, fault, met};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::Settings;
use crate::race::driver::{fire, reset};

/// The two strategies: one per kind of store.
const STRATEGIES: [&str; 2] = ["redis-lua", "db-atomic"];
/// Units on sale: more than the buyers before the kill can take.
const STOCK: i64 = 1500;
/// Buyers, and how many at once: the kill lands while the load is on.
const BUYERS: usize = 3000;
const CONCURRENCY: usize = 32;
/// When the kill comes, after the first buy.
const KILL_AFTER: Duration = Duration::from_millis(300);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let mut rows = Vec::new();
    for strategy in STRATEGIES {
        anyhow::ensure!(
            ctx.catalogue.get(strategy).is_some(),
            "instance-kill races {strategy}, which the catalogue no longer has"
        );
        // A fresh lab each: the killed instance stays dead.
        let row = ctx
            .with_lab(LabArgs::with_instances(2), async |ctx, lab| {
                let gateway =
                    Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, CONCURRENCY)?;
                let product = ctx.product();
                reset(&gateway, product, strategy, STOCK, Settings::default()).await?;
                let started = Instant::now();
                let buys = tokio::spawn({
                    let gateway = gateway.clone();
                    async move { fire(&gateway, product, "load", BUYERS, CONCURRENCY, None).await }
                });
                tokio::time::sleep(KILL_AFTER).await;
                fault(lab, &lab.info.instances[0].name, Signal::SIGKILL)?;
                let attempts = buys.await?;
                let row = ctx
                    .scripted_row(&gateway, product, &attempts, started)
                    .await?;
                Ok(ScenarioRow {
                    met: met(Expect::NoOversell, &row),
                    expected: "in-flight buys on the dead instance are unknown, none replayed, \
                               every 200 has its order"
                        .to_owned(),
                    scenario: Scenario::InstanceKill.name().to_owned(),
                    variant: String::new(),
                    row,
                    masters: Vec::new(),
                    cut: None,
                    reconciled: None,
                    slowdown: None,
                    window: None,
                })
            })
            .await?;
        rows.push(row);
    }
    Ok(rows)
}
