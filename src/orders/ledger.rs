//! The ledger: how many units each product sold, counted from durable
//! orders and never from the stock counter.
//!
//! Each product's store counts its orders ([`crate::model::seam::Store::orders`]).
//! A product stored in MySQL counts MySQL's orders, which its sales insert
//! in their own transaction. Any other order is either still in a Redis
//! stream or already in PostgreSQL (or, briefly, in both: committed but not
//! yet acknowledged). The streams are read first, then one PostgreSQL query
//! counts the table's orders plus the stream's orders the table does not
//! have yet. An entry that moves between the two reads is in the table by
//! then, so every order counts once.

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::order::state::Tally;
use crate::model::order::stream::{parse_entry, read_all};
use crate::model::product::{Product, Settings, StoreKind, keys};
use crate::sale::placement::Placed;
use crate::sale::waves;
use crate::stock::strategy::Catalogue;

/// One product's line of the comparison.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq, ToSchema)]
pub struct Ledger {
    /// Product id.
    pub id: i64,
    /// Strategy selling it.
    pub strategy: String,
    /// Stock put on sale since the last reset: the reset's, plus every
    /// unit an admin added since (`added`). What the sale is measured
    /// against.
    pub initial: i64,
    /// Of `initial`, units added to the live sale since the reset
    /// (`POST /admin/products/{id}/restock`).
    #[serde(default)]
    pub added: i64,
    /// Of it, the units on sale so far: all of them, or, with waves, the
    /// waves released until now.
    pub on_sale: i64,
    /// Orders recorded since the last reset, wherever they are: every
    /// 200 (with `pay_within_ms`, every hold, whatever became of it).
    pub sold: i64,
    /// Units the orders keep, what is measured against the stock: every
    /// order, or with `pay_within_ms` the held and paid ones (a hold
    /// given back kept nothing, and its unit sold again is counted once).
    #[serde(default)]
    pub kept: i64,
    /// With `pay_within_ms`: orders holding their unit, waiting for
    /// payment (0 otherwise).
    #[serde(default)]
    pub held: i64,
    /// With `pay_within_ms`: orders paid (0 otherwise).
    #[serde(default)]
    pub paid: i64,
    /// With `pay_within_ms`: holds cancelled or overdue, never paid.
    #[serde(default)]
    pub expired: i64,
    /// With `pay_within_ms`: units put back on sale.
    #[serde(default)]
    pub returned: i64,
    /// Units neither on sale, held nor paid: `max(0, (on_sale -
    /// remaining) - held - paid)` with `pay_within_ms`, `missing_orders`
    /// without. An expired hold whose unit a dead reaper never put back
    /// shows here (reconciliation gives it back).
    #[serde(default)]
    pub stranded: i64,
    /// Paid orders whose unit was put back all the same: the naive
    /// give-back's oversell, order by order.
    #[serde(default)]
    pub paid_and_returned: i64,
    /// The strategy's own stock counter now.
    pub remaining: i64,
    /// `max(0, sold - initial)`: units sold that did not exist; with
    /// `pay_within_ms`, `max(0, paid + held - initial)`.
    pub oversold: i64,
    /// Decrements that vanished: `max(0, sold - (initial - remaining))`.
    /// Two buyers writing the same `stock - 1` show up here.
    pub lost_updates: i64,
    /// Units gone from the counter with no order: `max(0, (initial -
    /// remaining) - sold)`. Always 0 unless a sale was recorded half.
    pub missing_orders: i64,
    /// Of `sold`, orders still in the stream, not yet in PostgreSQL.
    pub pending: i64,
    /// Buys an instance answered `outcome_unknown` (best effort: counted
    /// in Redis, so not while Redis itself is what failed). Some of them
    /// may be among `sold`; a history check tells which.
    #[serde(default)]
    pub unknown: i64,
    /// Reset generation.
    pub epoch: i64,
    /// Where the stock is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreKind>,
    /// Where the orders are, for a history check to read them: MySQL's
    /// `orders` for a product stored there, PostgreSQL's for every other
    /// (a Redis sale's order is moved there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders_in: Option<StoreKind>,
    /// The product's knobs.
    pub settings: Settings,
    /// Where the stock lives, counter by counter (`GET /stock/{id}`
    /// only; empty for a PostgreSQL stock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Vec<Placed>>,
}

/// Order ids still in the stream, by (product, epoch).
type StreamOrders = HashMap<(i64, i64), Vec<Uuid>>;

/// The ledger of each given product, in the given order.
pub async fn compute(
    backends: &Backends,
    catalogue: &Catalogue,
    products: &[Product],
) -> Result<Vec<Ledger>, BackendError> {
    let in_stream = stream_orders(backends).await?;
    let unknown = unknown_counts(backends, products).await?;
    let mut ledgers = Vec::with_capacity(products.len());
    for (product, unknown) in products.iter().zip(unknown) {
        let pending_ids = in_stream
            .get(&(product.id, product.epoch))
            .cloned()
            .unwrap_or_default();
        let store = catalogue.store(product);
        let (in_table, pending) = store.orders(backends, product, &pending_ids).await?;
        let added = store.added(backends, product).await?;
        let initial = product.initial + added;
        let on_sale = waves::on_sale(backends, store.as_ref(), product).await? + added;
        let remaining = store.mark(backends, product).await?.remaining;
        let sold = in_table + pending;
        let taken = on_sale - remaining;
        let life = if product.settings.pay_within_ms > 0 {
            // Orders still in a stream hold their unit.
            let tally = store.book().tally(backends, product).await?;
            Tally {
                holding: tally.holding + pending,
                ..tally
            }
        } else {
            Tally::default()
        };
        // Units the orders took and kept: a returned order's went back.
        let out = sold - life.returned;
        let (held, paid) = (life.holding, life.paid);
        let kept = if product.settings.pay_within_ms > 0 {
            held + paid
        } else {
            sold
        };
        ledgers.push(Ledger {
            id: product.id,
            strategy: product.strategy.clone(),
            initial,
            added,
            on_sale,
            sold,
            kept,
            held,
            paid,
            expired: life.expired,
            returned: life.returned,
            stranded: (taken - kept).max(0),
            paid_and_returned: life.paid_and_returned,
            remaining,
            oversold: (kept - initial).max(0),
            lost_updates: (out - taken).max(0),
            missing_orders: (taken - out).max(0),
            pending,
            unknown: unknown.unwrap_or(0),
            epoch: product.epoch,
            store: Some(store.kind()),
            orders_in: Some(store.orders_in()),
            settings: product.settings,
            placement: None,
        });
    }
    Ok(ledgers)
}

/// Reads every order stream once (the streams at once, each in pages:
/// on a cluster they live on different masters) and groups their order
/// ids. The writer deletes entries once stored, so the streams hold only
/// the not-yet-stored tail.
async fn stream_orders(backends: &Backends) -> Result<StreamOrders, BackendError> {
    let conn = backends.redis.get().await?;
    let reads = keys::all_orders().into_iter().map(|stream| {
        let mut conn = (*conn).clone();
        async move { read_all(&mut conn, &stream).await }
    });
    let replies = futures::future::join_all(reads)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut grouped = StreamOrders::new();
    for order in replies.iter().flatten().filter_map(parse_entry) {
        grouped
            .entry((order.product_id, order.epoch))
            .or_default()
            .push(order.order_id);
    }
    Ok(grouped)
}

/// Each product's count of `outcome_unknown` answers, in one round trip
/// for all of them (the dashboard asks for every product every second;
/// see [`crate::backends::conn::RedisConn::get_each`]).
async fn unknown_counts(
    backends: &Backends,
    products: &[Product],
) -> Result<Vec<Option<i64>>, BackendError> {
    if products.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<String> = products
        .iter()
        .map(|p| keys::unknown(p.id, p.epoch))
        .collect();
    Ok(backends.redis.get().await?.get_each(&names).await?)
}

/// The ledger as CSV (header plus one line per product).
pub fn to_csv(ledgers: &[Ledger]) -> String {
    let mut out = String::from(
        "id,strategy,initial,sold,remaining,oversold,lost_updates,missing_orders,pending,epoch\n",
    );
    for l in ledgers {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{}\n",
            l.id,
            l.strategy,
            l.initial,
            l.sold,
            l.remaining,
            l.oversold,
            l.lost_updates,
            l.missing_orders,
            l.pending,
            l.epoch
        ));
    }
    out
}
