//! One request of a race as the driver saw it: a buy, or a later step of
//! its order (a pay, a cancel, the give-back its buyer watched for), timed
//! and turned into a history line.

use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::judge::check::history::{Completion, Event, Op};
use crate::lab::client::{Answer, Gateway, OrderAction};
use crate::model::product::operation::WindowAction;

/// One request as the driver saw it (a buy, or a later step of its
/// order): who, when, and the answer.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// What it did.
    pub op: Op,
    /// The buyer.
    pub buyer: String,
    /// When it was sent.
    pub sent: Instant,
    /// How long the answer took.
    pub took: Duration,
    /// What came back.
    pub answer: Answer,
    /// A restock's units.
    pub units: Option<i64>,
}

impl Attempt {
    /// Sends one buy as `buyer` and times it.
    pub async fn make(target: &Gateway, product: i64, buyer: &str) -> Self {
        Self::make_with(target, product, buyer, None).await
    }

    /// [`Attempt::make`] with the buyer's reservation, if any.
    pub(super) async fn make_with(
        target: &Gateway,
        product: i64,
        buyer: &str,
        reservation: Option<&str>,
    ) -> Self {
        let sent = Instant::now();
        let answer = target.answer_with(product, buyer, reservation).await;
        Self {
            op: Op::Buy,
            buyer: buyer.to_owned(),
            sent,
            took: sent.elapsed(),
            answer,
            units: None,
        }
    }

    /// Adds `units` to `product`'s live sale as the operator (addition
    /// `id`), timed: a restock line of the history.
    pub async fn restock(target: &Gateway, product: i64, units: i64, id: Uuid) -> Self {
        let sent = Instant::now();
        let answer = target.restock(product, units, id).await;
        Self {
            op: Op::Restock,
            buyer: "operator".into(),
            sent,
            took: sent.elapsed(),
            answer,
            units: Some(units),
        }
    }

    /// Pauses, resumes or closes `product`'s sale as the operator, timed:
    /// a window line of the history.
    pub async fn window(target: &Gateway, product: i64, action: WindowAction) -> Self {
        let sent = Instant::now();
        let answer = target.window(product, action).await;
        Self {
            op: Op::of_window(action),
            buyer: "operator".into(),
            sent,
            took: sent.elapsed(),
            answer,
            units: None,
        }
    }

    /// Pays for `order` as `buyer`, timed.
    pub async fn pay(target: &Gateway, order: Uuid, buyer: &str) -> Self {
        Self::on_order(target, OrderAction::Pay, order, buyer).await
    }

    /// Cancels `order` as `buyer`, timed.
    pub async fn cancel(target: &Gateway, order: Uuid, buyer: &str) -> Self {
        Self::on_order(target, OrderAction::Cancel, order, buyer).await
    }

    async fn on_order(target: &Gateway, action: OrderAction, order: Uuid, buyer: &str) -> Self {
        let sent = Instant::now();
        let answer = target.order(action, order, buyer).await;
        Self {
            op: match action {
                OrderAction::Cancel => Op::Cancel,
                OrderAction::Pay | OrderAction::View => Op::Pay,
            },
            buyer: buyer.to_owned(),
            sent,
            took: sent.elapsed(),
            answer: answer.as_step(order),
            units: None,
        }
    }

    /// The give-back of `order`, abandoned by `buyer`, as the buyer sees
    /// it: from `due` the order is looked at every [`LOOK_EVERY`] until it
    /// reads `expired` (a 200 from `due` to then), for at most `limit`
    /// (not seen: status 0 and `still_held`, an unknown outcome).
    pub async fn expiry(
        target: &Gateway,
        order: Uuid,
        buyer: &str,
        due: Instant,
        limit: Duration,
    ) -> Self {
        tokio::time::sleep_until(due.into()).await;
        let mut answer = Answer::step(0, "still_held", order);
        while due.elapsed() < limit {
            let seen = target.order(OrderAction::View, order, buyer).await;
            if seen.status == 200 && seen.said == "expired" {
                answer = seen.as_step(order);
                break;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
        Self {
            op: Op::Expire,
            buyer: buyer.to_owned(),
            sent: due,
            took: due.elapsed(),
            answer,
            units: None,
        }
    }

    /// The history line of this request, its times relative to `began`.
    pub(super) fn event(&self, began: Instant) -> Event {
        let start = self.sent.saturating_duration_since(began);
        let answer = &self.answer;
        Event {
            op: self.op,
            buyer: self.buyer.clone(),
            start_us: start.as_micros() as u64,
            end_us: (start + self.took).as_micros() as u64,
            completion: Completion::of(answer.status, answer.code.as_deref()),
            status: answer.status,
            code: answer.code.clone(),
            order_id: answer.order_id,
            served_by: answer.served_by.clone(),
            stock_left: answer.stock_left,
            pay_by_ms: answer.pay_by_ms,
            units: self.units,
        }
    }
}

/// How often an abandoned hold's buyer looks whether it was given back.
const LOOK_EVERY: Duration = Duration::from_millis(100);
