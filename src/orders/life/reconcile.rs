//! Reconciliation: each product's stock counter against the durable truth
//! — the units on sale less those its orders keep (held and paid, or
//! every order of a product without holds) and those owed back — and,
//! with `repair`, the counter set to the truth.
//!
//! The repair never sells what is held: owed units go back one order at a
//! time through the same once-only put-back the reaper uses (a delay queue
//! coming by later finds them returned), and the counter is set by a
//! compare-and-set on its *moves* read with it before the orders were
//! counted (see [`Mark`]), under the product's lock for a locked strategy.
//! Not on its value: a put-back before the count and a sale after it
//! leave the value as read and the count one unit off, and a set on the
//! value would put a held unit back on sale (ABA). Every write of the
//! stock adds a move in its own atomic step, so any sale or put-back
//! between the read and the set fails the set, and the product is read
//! again; a repair reflects one consistent moment. A stock split over
//! segments is set under every segment's lock, spread over the segments
//! as a reset spreads it. `repair_pause_ms` pauses the repair after its
//! read and after its count, so a test can land a put-back and a sale in
//! those gaps.
//!
//! What it cannot repair: an acknowledged sale whose order was lost with
//! a Redis that came back empty is not in the truth (the truth is the
//! orders that exist), so its unit goes back on sale — the buyer's 200
//! stays a lie, which the history check names (`ok_without_order`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::giveback;
use crate::backends::failure::BackendError;
use crate::model::order::Order;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{Due, Mark};
use crate::orders::ledger;
use crate::sale::Shop;
use crate::sale::product_store;
use crate::sale::product_store::Listed;

/// How often a repair reads a product again when its stock moved.
const TRIES: usize = 5;

/// One product's drift, and what a repair did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct Drift {
    /// The product.
    pub id: i64,
    /// Its strategy.
    pub strategy: String,
    /// Where its stock is.
    pub store: StoreKind,
    /// Units on sale so far (all, or the waves released).
    pub on_sale: i64,
    /// The counter, as read.
    pub remaining: i64,
    /// Units the orders keep: held and paid (or every order, without
    /// holds).
    pub kept: i64,
    /// Expired orders whose unit is not back on sale yet.
    pub owed: i64,
    /// What the counter should hold: `on_sale - kept - owed` (at least 0).
    pub truth: i64,
    /// `remaining - truth`: above 0, units the counter would sell that do
    /// not exist (oversold); below 0, units stranded off sale.
    pub drift: i64,
    /// Owed units the repair put back.
    pub put_back: usize,
    /// Whether the repair set the counter to the truth.
    pub repaired: bool,
    /// The drift after the repair (`None` without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_after: Option<i64>,
    /// Why a drift was left as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Reconciles `ids` (every product when empty); `repair` puts owed units
/// back and sets each drifting counter to its truth.
pub async fn run(shop: &Shop, ids: &[i64], repair: bool) -> Result<Vec<Drift>, BackendError> {
    let mut drifts = Vec::new();
    for product in product_store::all(&shop.backends).await? {
        if !ids.is_empty() && !ids.contains(&product.id) {
            continue;
        }
        let listed = Listed::new(&shop.catalogue, product)?;
        drifts.push(one(shop, &listed, repair).await?);
    }
    Ok(drifts)
}

/// Reconciles one product.
async fn one(shop: &Shop, listed: &Listed, repair: bool) -> Result<Drift, BackendError> {
    let mut put_back = 0;
    if repair && listed.product.settings.pay_within_ms > 0 {
        let book = listed.store.book();
        let owed = book
            .due(&shop.backends, &listed.product, Due::Owed, i64::MAX)
            .await?;
        put_back = giveback::settle_owed(shop, listed, &owed).await?;
    }
    let (mut drift, mut mark) = measure(shop, listed).await?;
    drift.put_back = put_back;
    if !repair || drift.drift == 0 {
        return Ok(drift);
    }
    for _ in 0..TRIES {
        pause(listed).await;
        if set(shop, listed, mark, drift.truth).await? {
            let (after, _) = measure(shop, listed).await?;
            drift.repaired = true;
            drift.drift_after = Some(after.drift);
            return Ok(drift);
        }
        let (again, read) = measure(shop, listed).await?;
        (drift, mark) = (Drift { put_back, ..again }, read);
    }
    drift.note = Some(format!(
        "the stock kept moving: not repaired in {TRIES} tries"
    ));
    Ok(drift)
}

/// Reads the counter with its moves, then the orders: a sale or a
/// put-back between the two (or after) moves the stock, and the repair's
/// compare-and-set on the moves fails instead of repairing the wrong way.
async fn measure(shop: &Shop, listed: &Listed) -> Result<(Drift, Mark), BackendError> {
    let product = &listed.product;
    let mark = listed.store.mark(&shop.backends, product).await?;
    let remaining = mark.remaining;
    pause(listed).await;
    let ledger = ledger::compute(
        &shop.backends,
        &shop.catalogue,
        std::slice::from_ref(product),
    )
    .await?
    .pop()
    .ok_or_else(|| BackendError::Corrupt(format!("no ledger for product {}", product.id)))?;
    let holds = product.settings.pay_within_ms > 0;
    let kept = if holds {
        ledger.held + ledger.paid
    } else {
        ledger.sold
    };
    let owed = if holds {
        listed
            .store
            .book()
            .tally(&shop.backends, product)
            .await?
            .owed
    } else {
        0
    };
    let truth = (ledger.on_sale - kept - owed).max(0);
    let drift = Drift {
        id: product.id,
        strategy: product.strategy.clone(),
        store: listed.store.kind(),
        on_sale: ledger.on_sale,
        remaining,
        kept,
        owed,
        truth,
        drift: remaining - truth,
        put_back: 0,
        repaired: false,
        drift_after: None,
        note: None,
    };
    Ok((drift, mark))
}

/// The `repair_pause_ms` knob between a repair's steps (no pause without
/// it).
async fn pause(listed: &Listed) {
    let ms = listed.product.settings.repair_pause_ms;
    if ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    }
}

/// Sets the counter to `truth` through the strategy, if nothing wrote it
/// since `expected` was read.
async fn set(
    shop: &Shop,
    listed: &Listed,
    expected: Mark,
    truth: i64,
) -> Result<bool, BackendError> {
    let lane = shop.backends.lane.get().await?;
    let order = repairer(&listed.product, &shop.instance);
    let ctx = listed.ctx(lane.conn.clone(), &order, &shop.backends);
    listed.strategy.repair(&ctx, expected, truth).await
}

/// The order a repair carries through a lock (which may name a buyer): no
/// order is recorded.
fn repairer(product: &Product, instance: &str) -> Order {
    Order {
        order_id: Uuid::now_v7(),
        product_id: product.id,
        epoch: product.epoch,
        user_id: "reconcile".into(),
        strategy: product.strategy.clone(),
        served_by: instance.to_owned(),
    }
}
