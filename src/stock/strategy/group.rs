//! Group commit: the concurrent buyers of one product on one instance
//! queue, and one step sells to all of them — the leader/follower queue of
//! the databases built for hot rows (AliSQL/PolarDB's hot-row update),
//! after the same idea in TigerBeetle's batches.
//!
//! No timer: a buyer who finds the queue idle starts a runner at once, so
//! a lone buyer waits for nothing. While a group's step runs (a commit, a
//! script), the buyers who arrive queue, and the runner takes all of them
//! (up to [`GROUP_MAX`]) as the next group the moment the step returns. A
//! group forms only from the time the previous one took, so it grows with
//! the load by itself.
//!
//! The runner is its own task, so no buyer's answer waits for groups
//! after its own. Each buyer gets its own verdict; a failed step fails
//! every buyer of that group alike (see [`BackendError::for_another`]).
//! Across instances nothing is shared: each instance's groups meet at the
//! backend (a row lock, a script), which serializes them as it serialized
//! single sales.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::oneshot;

use super::Strategy;
use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::info::Info;
use crate::model::order::Order;
use crate::model::product::Product;
use crate::model::seam::{BuyCtx, Outcome};
use crate::model::telemetry;

/// Most buyers in one group: bounds a step's arguments (a PostgreSQL
/// array, a script's ARGV) and the latency of the group's last buyer.
pub const GROUP_MAX: usize = 256;

/// The step that sells to a whole group.
pub trait SellsGroup: Send + Sync + 'static {
    /// The catalogue entry of the strategy it makes.
    fn info(&self) -> &'static Info;

    /// Tries to sell one unit of `product` to the buyer of each of
    /// `orders` (one product, one reset, one instance, in arrival order)
    /// and records the orders sold: one verdict per order, in order.
    fn sell_group(
        &self,
        backends: &Backends,
        product: &Product,
        orders: &[Order],
    ) -> impl Future<Output = Result<Vec<Outcome>, BackendError>> + Send;
}

/// A group-commit strategy: its step behind the queues.
pub struct Grouped<S>(Arc<Groups<S>>);

impl<S: SellsGroup> Grouped<S> {
    /// The strategy that sells with `step`.
    pub fn new(step: S) -> Self {
        Self(Arc::new(Groups::new(step)))
    }
}

impl<S: SellsGroup> Strategy for Grouped<S> {
    fn info(&self) -> &'static Info {
        self.0.seller.info()
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let outcome = self
            .0
            .sell(ctx.backends, ctx.product, ctx.order.clone())
            .await?;
        Ok(outcome)
    }
}

/// One strategy's queues, one per product and reset being sold.
struct Groups<S> {
    seller: S,
    queues: Mutex<HashMap<(i64, i64), Queue>>,
}

/// A product's queue: buyers waiting, and whether a runner is at work.
#[derive(Default)]
struct Queue {
    waiting: Vec<Waiter>,
    running: bool,
}

struct Waiter {
    order: Order,
    queued: Instant,
    answer: Answer,
}

/// Where one buyer's verdict goes.
type Answer = oneshot::Sender<Result<Outcome, BackendError>>;

impl<S: SellsGroup> Groups<S> {
    fn new(seller: S) -> Self {
        Self {
            seller,
            queues: Mutex::new(HashMap::new()),
        }
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, HashMap<(i64, i64), Queue>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sells to `order`'s buyer as one of a group: queues, starting a
    /// runner if none is at work, and waits for this buyer's verdict.
    async fn sell(
        self: &Arc<Self>,
        backends: &Backends,
        product: &Product,
        order: Order,
    ) -> Result<Outcome, BackendError> {
        let (answer, verdict) = oneshot::channel();
        let key = (product.id, product.epoch);
        let start = {
            let mut queues = self.queues();
            let queue = queues.entry(key).or_default();
            queue.waiting.push(Waiter {
                order,
                queued: Instant::now(),
                answer,
            });
            !std::mem::replace(&mut queue.running, true)
        };
        if start {
            // A runner per busy spell, not per buyer: these copies are
            // made once for a whole run of groups.
            tokio::spawn(self.clone().run(key, backends.clone(), product.clone()));
        }
        verdict
            .await
            .map_err(|_| BackendError::Task("the group's runner ended without an answer".into()))?
    }

    /// Sells group after group until the queue is empty, then removes it.
    async fn run(self: Arc<Self>, key: (i64, i64), backends: Backends, product: Product) {
        loop {
            let group: Vec<Waiter> = {
                let mut queues = self.queues();
                let Some(queue) = queues.get_mut(&key) else {
                    return;
                };
                if queue.waiting.is_empty() {
                    queues.remove(&key);
                    return;
                }
                let take = queue.waiting.len().min(GROUP_MAX);
                queue.waiting.drain(..take).collect()
            };
            telemetry::group(
                self.seller.info().id,
                group.len(),
                group.iter().map(|w| w.queued.elapsed()),
            );
            let (orders, answers): (Vec<Order>, Vec<Answer>) =
                group.into_iter().map(|w| (w.order, w.answer)).unzip();
            let verdicts = self.seller.sell_group(&backends, &product, &orders).await;
            deliver(answers, verdicts);
        }
    }
}

/// Hands each buyer its verdict, or its copy of the group's failure. A
/// step that answered for the wrong number of buyers is a bug, reported
/// to all of them rather than guessed around.
fn deliver(answers: Vec<Answer>, verdicts: Result<Vec<Outcome>, BackendError>) {
    let verdicts = verdicts.and_then(|v| {
        if v.len() == answers.len() {
            Ok(v)
        } else {
            Err(BackendError::Corrupt(format!(
                "a group of {} buyers got {} verdicts",
                answers.len(),
                v.len()
            )))
        }
    });
    match verdicts {
        Ok(verdicts) => {
            for (answer, verdict) in answers.into_iter().zip(verdicts) {
                let _ = answer.send(Ok(verdict));
            }
        }
        Err(error) => {
            for answer in answers {
                let _ = answer.send(Err(error.for_another()));
            }
        }
    }
}
