//! Where an order is in its life: the `orders.state` column read back,
//! and the ledger's counts of each state.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::Order;

/// An order's state, as `GET /orders/{id}` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Sold outright: the product takes no payment step.
    Sold,
    /// Holding its unit until `pay_by_ms`.
    Held,
    /// Paid: the unit is the buyer's.
    Paid,
    /// Cancelled or overdue: its unit goes (or went) back on sale.
    Expired,
}

/// The `orders.state` values: what [`Status`] is stored as.
pub mod column {
    /// Paid.
    pub const PAID: &str = "paid";
    /// Cancelled or overdue; its unit not back on sale yet.
    pub const EXPIRED: &str = "expired";
    /// Cancelled or overdue; its unit back on sale.
    pub const RETURNED: &str = "returned";
}

/// An order with its life so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// The sale.
    pub order: Order,
    /// `orders.state`: `None` while it holds its unit.
    pub state: Option<String>,
    /// When its payment was taken, if it was.
    pub paid_at_ms: Option<i64>,
}

impl Tracked {
    /// The status a buyer is told, given whether the product takes
    /// payment. A paid order stays paid even if a naive give-back marked
    /// it expired afterwards: the buyer paid (the ledger counts it).
    pub fn status(&self, holds: bool) -> Status {
        match (self.state.as_deref(), self.paid_at_ms) {
            (_, Some(_)) => Status::Paid,
            (None, None) if holds => Status::Held,
            (None, None) => Status::Sold,
            (Some(_), None) => Status::Expired,
        }
    }
}

/// A product's orders by state, this reset (the ledger's columns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Holding their unit (no state yet).
    pub holding: i64,
    /// Paid (whatever a give-back wrote afterwards).
    pub paid: i64,
    /// Cancelled or overdue, never paid.
    pub expired: i64,
    /// Whose unit was put back on sale.
    pub returned: i64,
    /// Expired with the unit not back yet (a give-back in progress, or
    /// stranded by a reaper that died).
    pub owed: i64,
    /// Paid and yet given back: the naive job's oversell, order by order.
    pub paid_and_returned: i64,
}

/// An `orders` row as the books select it: the order's columns in
/// [`super::order_columns`]'s order.
pub type OrderRow = (Uuid, i64, i64, String, String, String);

/// An [`OrderRow`] followed by `state, paid_at_ms`.
pub type TrackedRow = (
    Uuid,
    i64,
    i64,
    String,
    String,
    String,
    Option<String>,
    Option<i64>,
);

/// The counts a book's tally selects, in [`Tally`]'s field order.
pub type TallyRow = (i64, i64, i64, i64, i64, i64);

impl From<OrderRow> for Order {
    fn from((order_id, product_id, epoch, user_id, strategy, served_by): OrderRow) -> Self {
        Self {
            order_id,
            product_id,
            epoch,
            user_id,
            strategy,
            served_by,
        }
    }
}

impl From<TrackedRow> for Tracked {
    fn from(
        (id, product, epoch, user, strategy, served_by, state, paid_at_ms): TrackedRow,
    ) -> Self {
        Self {
            order: Order::from((id, product, epoch, user, strategy, served_by)),
            state,
            paid_at_ms,
        }
    }
}

impl From<TallyRow> for Tally {
    fn from((holding, paid, expired, returned, owed, paid_and_returned): TallyRow) -> Self {
        Self {
            holding,
            paid,
            expired,
            returned,
            owed,
            paid_and_returned,
        }
    }
}
