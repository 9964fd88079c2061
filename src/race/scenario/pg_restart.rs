//! `pg-restart`: PostgreSQL stops in the middle of a sale and comes back;
//! the instances are not restarted. Variants: an immediate shutdown
//! (SIGQUIT to the postmaster: no checkpoint, crash recovery at the next
//! start) and a crash (SIGKILL to the postmaster and every backend). Raced:
//! every safe strategy whose stock lives in PostgreSQL, and `redis-lua`,
//! which needs PostgreSQL only for its order writer (both from the
//! catalogue).
//!
//! Expected, from the mechanism:
//! - a database strategy's sale is one transaction: a COMMIT that was
//!   answered is durable (fsync on), one cut off is unknown, anything
//!   earlier rolls back. So no buyer is told "sold" without an order, no
//!   order exists that its buyer was told did not happen (the history
//!   check holds every row to that), nothing oversells, and once the
//!   server is back the pools open new connections and the rest of the
//!   stock sells.
//! - `redis-lua` sells from Redis throughout; its orders wait in the
//!   stream while the writer cannot insert them and all reach PostgreSQL
//!   afterwards: no acknowledged order lost.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow, met};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::{Settings, StoreKind};
use crate::race::driver::{fire, reset};

/// Units on sale.
const STOCK: i64 = 30;
/// Buyers arriving during the fault, one every [`PACE`].
const DURING: usize = 40;
/// Arrivals spread over `DURING × PACE` = 2 s, the outage in the middle.
const PACE: Duration = Duration::from_millis(50);
/// When the fault strikes, after the first arrival.
const STRIKE_AFTER: Duration = Duration::from_millis(500);
/// How long the server stays down.
const DOWN_FOR: Duration = Duration::from_millis(500);
/// Buyers after the recovery: more than the stock, so it sells out.
const AFTER: usize = 40;

/// The two ways the server goes away.
const VARIANTS: [(&str, Signal); 2] =
    [("immediate", Signal::SIGQUIT), ("sigkill", Signal::SIGKILL)];

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let strategies: Vec<&'static str> = ctx
        .catalogue
        .all()
        .map(|s| s.info())
        .filter(|info| info.safe && (info.store == StoreKind::Postgres || info.id == "redis-lua"))
        .map(|info| info.id)
        .collect();
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        let mut rows = Vec::new();
        for (variant, signal) in VARIANTS {
            // Every strategy at once, each on its own product: one outage
            // strikes every sale in the middle of its arrivals.
            let mut products = Vec::new();
            for strategy in &strategies {
                let product = ctx.product();
                reset(&gateway, product, strategy, STOCK, Settings::default()).await?;
                products.push(product);
            }
            let started = Instant::now();
            let during: Vec<_> = products
                .iter()
                .map(|&product| {
                    let gateway = gateway.clone();
                    tokio::spawn(async move {
                        fire(&gateway, product, "during", DURING, 8, Some(PACE)).await
                    })
                })
                .collect();
            tokio::time::sleep(STRIKE_AFTER).await;
            eprintln!("  PostgreSQL {variant}");
            match signal {
                // The postmaster's own immediate shutdown: it tells its
                // backends to quit at once and exits.
                Signal::SIGQUIT => lab.signal("postgres", signal)?,
                _ => lab.signal_tree("postgres", signal)?,
            }
            tokio::time::sleep(DOWN_FOR).await;
            lab.restart("postgres").await?;
            for (product, during) in products.into_iter().zip(during) {
                let mut attempts = during.await?;
                attempts.extend(fire(&gateway, product, "after", AFTER, 8, None).await);
                let row = ctx
                    .scripted_row(&gateway, product, &attempts, started)
                    .await?;
                rows.push(ScenarioRow {
                    // Honest, no oversell, and all `STOCK` units sold.
                    met: met(Expect::SellsAll, &row),
                    expected: "no 200 without an order, unknown outcomes reported as unknown, \
                               sells the rest once the server is back"
                        .to_owned(),
                    scenario: Scenario::PgRestart.name().to_owned(),
                    variant: variant.to_owned(),
                    row,
                    masters: Vec::new(),
                    cut: None,
                    reconciled: None,
                    slowdown: None,
                    window: None,
                });
            }
        }
        Ok(rows)
    })
    .await
}
