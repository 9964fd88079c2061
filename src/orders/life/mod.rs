//! An order's life after the sale, as use cases: look at an order, pay
//! for it, cancel it ([`view`], [`pay`], [`cancel`]), and the reaper that
//! gives overdue holds back ([`reaper`]), each by the product's give-back
//! mechanism ([`giveback`]).
//!
//! Every transition is decided where the order's state lives — the
//! database that keeps the product's orders ([`crate::model::seam::Book`]) — by
//! one conditional update, so a payment and an expiry racing for one hold
//! cannot both win (except under `naive-cron`, which is there to show
//! what happens when they can).

pub mod giveback;
pub mod reaper;
pub mod reconcile;

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::backends::failure::BackendError;
use crate::model::order::state::{Status, Tracked};
use crate::model::product::hold_terms::{Giveback, made_at_ms, overdue_below, pay_by_ms};
use crate::model::product::now_ms;
use crate::model::seam::Book;
use crate::model::telemetry;
use crate::sale::Shop;
use crate::sale::product_store;
use crate::sale::product_store::Listed;
use crate::stock::store::mysql::Mysql;
use crate::stock::store::postgres::Pg;
use crate::stock::store::sql_book::SqlBook;

/// An order as its buyer sees it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OrderView {
    /// The order.
    pub order_id: Uuid,
    /// The product.
    pub product_id: i64,
    /// Where it is in its life.
    pub status: Status,
    /// For a product with `pay_within_ms`: the first millisecond (since
    /// the Unix epoch) the hold is overdue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pay_by_ms: Option<u64>,
    /// The instance that answered, as a buy's 200 names it: a history of
    /// the order's steps says where each one ran.
    pub served_by: String,
}

/// Why an order's request was refused.
#[derive(Debug)]
pub enum Refused {
    /// No order with that id (or one voided by its product's reset).
    Unknown,
    /// Another buyer's order.
    NotYours,
    /// The hold expired (or was cancelled): nothing was paid.
    Expired,
    /// The order is not a hold (sold outright, or already paid).
    NotHeld(Status),
    /// The order was just made and is not recorded where its state lives
    /// yet (a Redis sale's order on its way to PostgreSQL): retry.
    NotYet,
    /// A backend failed.
    Failed(BackendError),
}

impl From<BackendError> for Refused {
    fn from(error: BackendError) -> Self {
        Self::Failed(error)
    }
}

/// How long a request waits for a just-made order to reach its database.
const ARRIVAL_WAIT: Duration = Duration::from_secs(1);
/// An order younger than this that is found nowhere may still be on its
/// way; an older one does not exist.
const ON_ITS_WAY: Duration = Duration::from_secs(30);

/// The order `order_id` of `buyer`, with its product as reset now.
async fn locate(
    shop: &Shop,
    order_id: Uuid,
    buyer: &str,
) -> Result<(Tracked, Arc<Listed>), Refused> {
    let books: [&dyn Book; 2] = [&SqlBook::<Pg>(PhantomData), &SqlBook::<Mysql>(PhantomData)];
    let waited = tokio::time::Instant::now();
    let tracked = loop {
        let mut found = None;
        for book in books {
            if let Some(tracked) = book.find(&shop.backends, order_id).await? {
                found = Some(tracked);
                break;
            }
        }
        match found {
            Some(tracked) => break tracked,
            None if !recent(shop, order_id) => return Err(Refused::Unknown),
            None if waited.elapsed() >= ARRIVAL_WAIT => return Err(Refused::NotYet),
            None => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    if tracked.order.user_id != buyer {
        return Err(Refused::NotYours);
    }
    let id = tracked.order.product_id;
    let listed = match shop.memory.products.get(id) {
        Ok(listed) => Some(listed),
        Err(miss) => {
            let lane = shop.backends.lane.get().await?;
            let stores = (&shop.backends, &shop.catalogue);
            product_store::fill(
                &shop.memory.products,
                miss,
                stores,
                &mut lane.conn.clone(),
                id,
            )
            .await?
        }
    };
    match listed {
        Some(listed) if listed.product.epoch == tracked.order.epoch => Ok((tracked, listed)),
        _ => Err(Refused::Unknown),
    }
}

/// Whether a v7 id was made within [`ON_ITS_WAY`] (ids carry the shared
/// clock's time).
fn recent(shop: &Shop, order_id: Uuid) -> bool {
    let now = shop.backends.clock.now_ms();
    made_at_ms(order_id)
        .is_some_and(|made| now.saturating_sub(made) < ON_ITS_WAY.as_millis() as u64)
}

/// The buyer's view of `tracked`.
fn view_of(shop: &Shop, tracked: &Tracked, listed: &Listed) -> OrderView {
    let within = listed.product.settings.pay_within_ms;
    let status = tracked.status(within > 0);
    OrderView {
        order_id: tracked.order.order_id,
        product_id: tracked.order.product_id,
        status,
        pay_by_ms: (within > 0)
            .then(|| pay_by_ms(tracked.order.order_id, within))
            .flatten(),
        served_by: shop.instance.clone(),
    }
}

/// `GET /orders/{id}`: the buyer's order.
pub async fn view(shop: &Shop, order_id: Uuid, buyer: &str) -> Result<OrderView, Refused> {
    let (tracked, listed) = locate(shop, order_id, buyer).await?;
    Ok(view_of(shop, &tracked, &listed))
}

/// `POST /orders/{id}/pay`: held → paid, before the due time (under the
/// state machine; the naive job's payment takes any hold not yet marked).
/// Paying a paid order again is answered as paid.
pub async fn pay(shop: &Shop, order_id: Uuid, buyer: &str) -> Result<OrderView, Refused> {
    let (tracked, listed) = locate(shop, order_id, buyer).await?;
    let settings = &listed.product.settings;
    match view_of(shop, &tracked, &listed).status {
        Status::Held => {}
        Status::Paid => return Ok(view_of(shop, &tracked, &listed)),
        Status::Expired => {
            noted(shop, &listed, "late_payment", 1);
            return Err(Refused::Expired);
        }
        status @ Status::Sold => return Err(Refused::NotHeld(status)),
    }
    let now = shop.backends.clock.now_ms();
    let payable_from = settings
        .giveback
        .checks_due()
        .then(|| overdue_below(now, settings.pay_within_ms));
    let book = listed.store.book();
    book.pay(&shop.backends, order_id, payable_from, now as i64)
        .await?;
    let paid = settled(shop, &listed, order_id, Status::Paid).await;
    match &paid {
        Ok(_) => noted(shop, &listed, "paid", 1),
        Err(Refused::Expired) => noted(shop, &listed, "late_payment", 1),
        Err(_) => {}
    }
    paid
}

/// `POST /orders/{id}/cancel`: the buyer gives the hold up, and its unit
/// goes back on sale by the product's mechanism. Cancelling an expired
/// order again is answered as expired.
pub async fn cancel(shop: &Shop, order_id: Uuid, buyer: &str) -> Result<OrderView, Refused> {
    let (tracked, listed) = locate(shop, order_id, buyer).await?;
    match view_of(shop, &tracked, &listed).status {
        Status::Held => {}
        Status::Expired => return Ok(view_of(shop, &tracked, &listed)),
        status => return Err(Refused::NotHeld(status)),
    }
    let book = listed.store.book();
    match listed.product.settings.giveback {
        Giveback::NaiveCron => {
            giveback::naive(shop, &listed, std::slice::from_ref(&tracked.order)).await?;
        }
        Giveback::StateMachine | Giveback::DelayQueue => {
            if !book.expire(&shop.backends, &[order_id]).await?.is_empty() {
                giveback::after_expiry(shop, &listed, std::slice::from_ref(&tracked.order)).await?;
            }
        }
    }
    let cancelled = settled(shop, &listed, order_id, Status::Expired).await;
    if cancelled.is_ok() {
        noted(shop, &listed, "cancelled", 1);
    }
    cancelled
}

/// `n` order-life events of kind `event` (one of
/// [`telemetry::LIFE_EVENTS`]) on `listed`'s product: in `/metrics` and in
/// the live view.
pub fn noted(shop: &Shop, listed: &Listed, event: &'static str, n: u64) {
    telemetry::order_life(event, n);
    let now_s = now_ms() / 1000;
    let live = &shop.memory.live;
    live.record_life(listed.product.id, event, n as u32, now_s);
}

/// The order after a transition was tried: `wanted` if it got there (by
/// this request or another), else why not.
async fn settled(
    shop: &Shop,
    listed: &Listed,
    order_id: Uuid,
    wanted: Status,
) -> Result<OrderView, Refused> {
    let tracked = listed
        .store
        .book()
        .find(&shop.backends, order_id)
        .await?
        .ok_or(Refused::Unknown)?;
    let view = view_of(shop, &tracked, listed);
    match view.status {
        status if status == wanted => Ok(view),
        Status::Expired => Err(Refused::Expired),
        Status::Held if wanted == Status::Paid => Err(Refused::Expired),
        status => Err(Refused::NotHeld(status)),
    }
}
