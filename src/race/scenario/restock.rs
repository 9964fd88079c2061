//! `restock`: units added to a live sale while buyers race, under every
//! safe strategy on every store it can sell from. Buyers arrive
//! [`PACE_MS`] apart; [`ADDITIONS`] additions of [`UNITS`] each land
//! mid-race through the gateway (one of them sent twice with its id, as
//! an admin retrying after a timeout), the last after the first units
//! sold out; then buyers keep coming one at a time until they are told
//! `sold_out`. The Redis rows race again on a Redis Cluster of three
//! masters.
//!
//! Expected, from the mechanism: an addition is one atomic step beside
//! its record (a Redis script, or the row's transaction), under the
//! product's lock where it has one, so no critical section writes over
//! it; every instance forgets the sold-out flag. So the ledger's initial
//! is the reset's stock plus each distinct addition once (the retry adds
//! nothing), every unit sells once, none is oversold, and the history
//! check — the stock at each instant being what was on sale then — finds
//! nothing.

use std::time::{Duration, Instant};

use uuid::Uuid;

use super::{Ctx, ScenarioRow, judge};
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::{Settings, StoreKind};
use crate::race::driver::{Attempt, fire, reset};

/// Units at the reset.
pub const RESET_STOCK: i64 = 10;
/// Additions, each of [`UNITS`].
const ADDITIONS: usize = 3;
const UNITS: i64 = 10;
/// Units the additions put on sale: every row's ledger must hold
/// `RESET_STOCK + ADDED` as its initial, all sold.
pub const ADDED: i64 = ADDITIONS as i64 * UNITS;
/// Buyers in the race: fewer than the units in the end, so the last
/// addition lands on a sold-out product and the sweep sells it.
const BUYERS: usize = 30;
/// One buyer every this many ms: the race lasts `BUYERS × PACE_MS`.
const PACE_MS: u64 = 10;
/// The additions' times after the first buyer: one early, one mid-race,
/// one after the race.
const ADD_AT_MS: [u64; ADDITIONS] = [60, 150, 450];

/// Masters of the cluster the Redis rows race on a second time.
const MASTERS: usize = 3;

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let mut rows = phase(ctx, LabArgs::with_instances(2), &sellers(ctx), "").await?;
    // Again on a Redis Cluster: each product's keys (its counter, the
    // additions' hash, its lock, each segment) wherever their slots are.
    let on_redis: Vec<_> = sellers(ctx)
        .into_iter()
        .filter(|(_, store)| *store == StoreKind::Redis)
        .collect();
    let cluster = LabArgs {
        redis_cluster: Some(MASTERS),
        ..LabArgs::with_instances(2)
    };
    rows.extend(phase(ctx, cluster, &on_redis, "-cluster").await?);
    Ok(rows)
}

/// Every `(strategy, store)` raced at once on one lab; `suffix` marks the
/// variant's store (`redis-cluster`).
async fn phase(
    ctx: &mut Ctx,
    topology: LabArgs,
    sellers: &[(&'static str, StoreKind)],
    suffix: &str,
) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(topology, async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        let mut products = Vec::new();
        for &(strategy, store) in sellers {
            let product = ctx.product();
            let settings = Settings {
                store: Some(store),
                ..Settings::default()
            };
            reset(&gateway, product, strategy, RESET_STOCK, settings).await?;
            products.push((product, format!("{strategy}@{}{suffix}", store.as_str())));
        }
        // Every product at once: paced buyers mostly wait.
        let started = Instant::now();
        let races = products.iter().map(|(product, _)| sale(&gateway, *product));
        let raced = futures::future::try_join_all(races).await?;
        let mut rows = Vec::new();
        for ((product, variant), attempts) in products.into_iter().zip(raced) {
            let row = ctx
                .scripted_row(&gateway, product, &attempts, started)
                .await?;
            let added = row.initial - RESET_STOCK;
            let mut scenario = judge(row, Scenario::Restock, &variant, Expect::SellsAll);
            // Each distinct addition counted once: the retry added nothing.
            scenario.met &= added == ADDED;
            rows.push(scenario);
        }
        Ok(rows)
    })
    .await
}

/// Every safe strategy with each store it sells from.
fn sellers(ctx: &Ctx) -> Vec<(&'static str, StoreKind)> {
    ctx.catalogue
        .all()
        .map(|s| s.info())
        .filter(|info| info.safe)
        .flat_map(|info| info.stores.iter().map(move |&store| (info.id, store)))
        .collect()
}

/// One product's race: paced buyers, the additions among them, then a
/// sweep until `sold_out`. Every request, the additions included.
async fn sale(gateway: &Gateway, product: i64) -> anyhow::Result<Vec<Attempt>> {
    let prefix = format!("restock-{product}");
    let pace = Some(Duration::from_millis(PACE_MS));
    let buyers = fire(gateway, product, &prefix, BUYERS, BUYERS, pace);
    let (mut attempts, added) = tokio::join!(buyers, additions(gateway, product));
    attempts.extend(added?);
    attempts.extend(sweep(gateway, product, &prefix).await);
    Ok(attempts)
}

/// The additions at their times, each retried with its id while it is
/// refused with nothing added (503: its lock was not taken in time, as
/// an admin among spinning buyers can be), as an admin would; the
/// second sent again once it answered 200.
async fn additions(gateway: &Gateway, product: i64) -> anyhow::Result<Vec<Attempt>> {
    let began = Instant::now();
    let mut attempts = Vec::new();
    for (i, at) in ADD_AT_MS.into_iter().enumerate() {
        tokio::time::sleep_until((began + Duration::from_millis(at)).into()).await;
        let id = Uuid::now_v7();
        for _ in 0..TRIES {
            let attempt = Attempt::restock(gateway, product, UNITS, id).await;
            let (status, code) = (attempt.answer.status, attempt.answer.code.clone());
            attempts.push(attempt);
            match status {
                200 => break,
                503 if code.as_deref() != Some("outcome_unknown") => continue,
                _ => anyhow::bail!("restock of {product}: {status} {code:?}"),
            }
        }
        let added = attempts.last().map(|a| a.answer.status);
        anyhow::ensure!(
            added == Some(200),
            "restock of {product}: refused {TRIES} times"
        );
        if i == 1 {
            let again = gateway.restock_answer(product, UNITS, id).await?;
            anyhow::ensure!(
                again.replayed,
                "a retried addition of {product} added again"
            );
        }
    }
    Ok(attempts)
}

/// How often an addition is sent before the scenario gives up on it.
const TRIES: usize = 5;

/// Buyers one at a time until one is told `sold_out` (at most every
/// unit again, so a product that never sells out ends too).
async fn sweep(gateway: &Gateway, product: i64, prefix: &str) -> Vec<Attempt> {
    let most = (RESET_STOCK + ADDED) as usize + 5;
    let mut attempts = Vec::new();
    for i in 0..most {
        let attempt = Attempt::make(gateway, product, &format!("{prefix}-sweep-{i}")).await;
        let done = attempt.answer.code.as_deref() == Some("sold_out");
        attempts.push(attempt);
        if done {
            break;
        }
    }
    attempts
}
