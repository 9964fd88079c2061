//! `abandoned-carts`: most buyers never pay. Buyers keep coming, one every
//! `PACE_MS`; one holder in `PAYS_ONE_IN` pays (`PAY_DELAY_MS` after its
//! hold), the rest walk away, and their holds expire after
//! `PAY_WITHIN_MS`. The stock cycles: held, given back, held again, until
//! every unit is paid. Raced under the two safe mechanisms on Redis,
//! PostgreSQL and MySQL stock.
//!
//! Expected: every unit paid in the end, none oversold or stranded; the
//! row says how many holds it took, how many units went back, and how
//! long until the last unit was paid.

use std::time::{Duration, Instant};

use super::holds::{LifeRace, SELLERS, holding, pay_all, variant};
use super::{Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::Scenario;
use crate::model::product::hold_terms::Giveback;
use crate::race::driver::{Attempt, reset};

/// Units on sale.
const UNITS: i64 = 10;
/// How long a hold waits for its payment.
const PAY_WITHIN_MS: u64 = 400;
/// One holder in this many pays.
const PAYS_ONE_IN: usize = 4;
/// How long a paying holder takes to pay.
const PAY_DELAY_MS: u64 = 100;
/// A new buyer every this many ms.
const PACE_MS: u64 = 10;
/// The most a product is raced before it counts as never fully paid.
const LIMIT: Duration = Duration::from_secs(30);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        let mut carts = Vec::new();
        for giveback in [Giveback::StateMachine, Giveback::DelayQueue] {
            for (strategy, store) in SELLERS {
                let product = ctx.product();
                let settings = holding(store, giveback, PAY_WITHIN_MS, 0);
                reset(&gateway, product, strategy, UNITS, settings).await?;
                carts.push((product, variant(strategy, store, giveback)));
            }
        }
        // Every product's shoppers at once: each product cycles on its own
        // (its holds, its reaper's give-backs), none waits for another.
        let started = Instant::now();
        let shops = carts.iter().map(|(product, _)| shop(&gateway, *product));
        let shopped = futures::future::try_join_all(shops).await?;
        let mut rows = Vec::new();
        for ((product, variant), (attempts, all_paid)) in carts.into_iter().zip(shopped) {
            let race = LifeRace {
                scenario: Scenario::AbandonedCarts,
                variant,
                expected: "every unit paid in the end, none oversold or stranded",
                product,
                attempts: &attempts,
                started,
                all_paid_ms: all_paid.map(|d| d.as_millis() as u64),
            };
            rows.push(
                ctx.life_row(&gateway, race, |row, life| {
                    row.oversold == 0
                        && life.paid == UNITS
                        && life.stranded == 0
                        && life.drift == 0
                        && all_paid.is_some()
                })
                .await?,
            );
        }
        Ok(rows)
    })
    .await
}

/// Buyers keep coming until every unit is paid (or [`LIMIT`]): every buy
/// and payment, and how long it took to sell out for good.
async fn shop(gateway: &Gateway, product: i64) -> anyhow::Result<(Vec<Attempt>, Option<Duration>)> {
    let started = Instant::now();
    let mut buys = Vec::new();
    let mut payers = Vec::new();
    let mut holders = 0usize;
    for i in 0u64.. {
        if started.elapsed() >= LIMIT
            || (i.is_multiple_of(20) && all_paid(gateway, product).await?)
        {
            break;
        }
        let attempt = Attempt::make(gateway, product, &format!("ac-{i}")).await;
        if let (200, Some(order)) = (attempt.answer.status, attempt.answer.order_id) {
            holders += 1;
            if holders.is_multiple_of(PAYS_ONE_IN) {
                let (gateway, buyer) = (gateway.clone(), attempt.buyer.clone());
                payers.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(PAY_DELAY_MS)).await;
                    pay_all(&gateway, &[(order, buyer)]).await
                }));
            }
        }
        buys.push(attempt);
        tokio::time::sleep(Duration::from_millis(PACE_MS)).await;
    }
    let all_paid_after = all_paid(gateway, product).await?.then(|| started.elapsed());
    for payer in payers {
        buys.extend(payer.await?);
    }
    Ok((buys, all_paid_after))
}

/// Whether every unit of `product` is paid.
async fn all_paid(gateway: &Gateway, product: i64) -> anyhow::Result<bool> {
    Ok(gateway.ledger(product).await?.paid >= UNITS)
}
