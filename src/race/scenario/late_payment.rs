//! `late-payment`: half of the buyers pay in time, the other half just as
//! the reaper gives their overdue holds back — under each give-back
//! mechanism, on Redis, PostgreSQL and MySQL stock.
//!
//! Staging: `UNITS` holds of `PAY_WITHIN_MS`; the give-back's steps are
//! `PAUSE_MS` apart (`reaper_pause_ms`). The on-time half pays at once. The
//! late half waits until the reaper has begun on them — the product's
//! counter shows a unit back (the naive job puts units back first) or a
//! late hold reads `expired` (the state machine expires first) — and then
//! pays, inside the pause. Once the give-back is over (every late hold
//! marked returned), as many new buyers again buy what came back.
//!
//! Expected, from the mechanisms (`src/orders/life/giveback.rs`):
//! - `naive-cron` has put the late holds' units back and marks them only
//!   after the pause; its payment checks nothing but "not marked yet", so
//!   the late payers pay, and their units are sold again: paid + held >
//!   initial (`paid_and_returned` > 0). Both instances' jobs put each unit
//!   back, so even more is resold.
//! - `state-machine` and `delay-queue` moved each late hold held → expired
//!   before the pause, in one conditional update; a payment then finds no
//!   hold and is told 409 `expired`. The units come back once each: paid +
//!   held ≤ initial, nothing stranded.

use std::time::{Duration, Instant};

use super::holds::{LifeRace, SELLERS, holding, holds_of, pay_all, variant, wait_for};
use super::{Ctx, ScenarioRow};
use crate::lab::LabArgs;
use crate::lab::client::{Gateway, OrderAction};
use crate::model::info::Scenario;
use crate::model::product::hold_terms::Giveback;
use crate::race::driver::{fire, reset};

/// Holds per product.
const UNITS: usize = 6;
/// How long a hold waits for its payment.
const PAY_WITHIN_MS: u64 = 500;
/// The pause between the give-back's steps: the late payments land in it.
const PAUSE_MS: u64 = 1_500;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 32)?;
        let mut rows = Vec::new();
        for giveback in Giveback::ALL {
            for (strategy, store) in SELLERS {
                let product = ctx.product();
                let settings = holding(store, giveback, PAY_WITHIN_MS, PAUSE_MS);
                reset(&gateway, product, strategy, UNITS as i64, settings).await?;
                let started = Instant::now();
                let mut attempts = fire(&gateway, product, "lp", UNITS, UNITS, None).await;
                let holds = holds_of(&attempts);
                let (on_time, late) = holds.split_at(holds.len() / 2);
                attempts.extend(pay_all(&gateway, on_time).await);
                reaper_began(&gateway, product, late).await?;
                attempts.extend(pay_all(&gateway, late).await);
                // The give-back's second step, then what came back sold.
                // Not over in time: the row's judgement says so.
                let _ = given_back(&gateway, product, late.len()).await;
                attempts.extend(fire(&gateway, product, "lp2", 2 * UNITS, UNITS, None).await);
                let expected = expectation(giveback);
                let race = LifeRace {
                    scenario: Scenario::LatePayment,
                    variant: variant(strategy, store, giveback),
                    expected,
                    product,
                    attempts: &attempts,
                    started,
                    all_paid_ms: None,
                };
                let late_count = late.len() as u64;
                rows.push(
                    ctx.life_row(&gateway, race, |row, life| match giveback {
                        Giveback::NaiveCron => row.oversold > 0 && life.paid_and_returned > 0,
                        _ => {
                            row.oversold == 0
                                && life.pays_expired == late_count
                                && life.paid_and_returned == 0
                                && life.stranded == 0
                                && life.drift == 0
                        }
                    })
                    .await?,
                );
            }
        }
        Ok(rows)
    })
    .await
}

/// What each mechanism is expected to do.
fn expectation(giveback: Giveback) -> &'static str {
    match giveback {
        Giveback::NaiveCron => "oversells: late payers pay for units already back on sale",
        _ => "no oversell: every late payer told expired, each unit back once",
    }
}

/// Waits until the reaper has finished with the late holds: all of them
/// returned (put back and marked, or, naive, marked after being paid).
async fn given_back(gateway: &Gateway, product: i64, late: usize) -> anyhow::Result<()> {
    wait_for(
        "the give-back to finish",
        Duration::from_secs(20),
        || async { Ok(gateway.ledger(product).await?.returned >= late as i64) },
    )
    .await
}

/// Waits until the reaper has begun giving `late` back: a unit is back
/// on sale, or one of them reads expired.
async fn reaper_began(
    gateway: &Gateway,
    product: i64,
    late: &[(uuid::Uuid, String)],
) -> anyhow::Result<()> {
    let Some((order, buyer)) = late.first() else {
        return Ok(());
    };
    wait_for("the reaper to begin", Duration::from_secs(20), || async {
        if gateway.ledger(product).await?.remaining > 0 {
            return Ok(true);
        }
        Ok(gateway.order(OrderAction::View, *order, buyer).await.said == "expired")
    })
    .await
}
