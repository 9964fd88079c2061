//! The reaper: a task in every instance that gives overdue holds back, by
//! each product's mechanism, every [`TICK`]. Several instances reap at
//! once on purpose (no leader to lose): the state machine's conditional
//! updates and the delay queue's `SKIP LOCKED` claims keep them from
//! giving one unit back twice; the naive job does not, which is its
//! failure.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use uuid::Uuid;

use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::order::Order;
use crate::model::product::hold_terms::{Giveback, overdue_below, pay_by_ms};
use crate::model::seam::Due;
use crate::model::telemetry;
use crate::sale::Shop;
use crate::sale::product_store;
use crate::sale::product_store::Listed;

use super::giveback;

/// How often the reaper looks for overdue holds: a unit goes back within
/// about this long after its due time.
pub const TICK: Duration = Duration::from_millis(200);
/// The most holds one pass gives back per product (the next pass takes
/// the rest).
const BATCH: i64 = 500;

/// Reaps until `stopping` turns true.
pub async fn run(shop: Arc<Shop>, mut stopping: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let busy = Busy::default();
    while !*stopping.borrow() {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(error) = pass(&shop, &busy).await {
                    tracing::warn!(%error, "reaper pass failed");
                }
            }
            _ = stopping.changed() => {}
        }
    }
}

/// The products this instance's reaper is giving back now: each product
/// is reaped by one task at a time, and a product whose give-back takes
/// long (its pause, a slow lock) holds up no other product's.
#[derive(Clone, Default)]
struct Busy(Arc<Mutex<HashSet<i64>>>);

impl Busy {
    /// Marks `id` busy until the returned guard is dropped (a panicking
    /// give-back included); `None` if it already was.
    fn take(&self, id: i64) -> Option<Taken> {
        let fresh = self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(id);
        fresh.then(|| Taken(self.clone(), id))
    }
}

/// A product marked busy, for as long as this lives.
struct Taken(Busy, i64);

impl Drop for Taken {
    fn drop(&mut self) {
        let Taken(Busy(set), id) = self;
        set.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
    }
}

/// Starts a give-back for every product that takes payment and is not
/// being reaped already; does not wait for them.
async fn pass(shop: &Arc<Shop>, busy: &Busy) -> Result<(), BackendError> {
    for product in product_store::all(&shop.backends).await? {
        if product.settings.pay_within_ms == 0 {
            continue;
        }
        let Some(taken) = busy.take(product.id) else {
            continue;
        };
        let shop = shop.clone();
        tokio::spawn(async move {
            let _taken = taken;
            let id = product.id;
            let reaped = match Listed::new(&shop.catalogue, product) {
                Ok(listed) => reap(&shop, &listed).await,
                Err(error) => Err(error),
            };
            if let Err(error) = reaped {
                tracing::warn!(%error, product = id, "giving overdue holds back failed");
            }
        });
    }
    Ok(())
}

/// Gives `listed`'s overdue holds back, a batch of at most [`BATCH`] at a
/// time until a batch comes back short: at a sale rate above a batch per
/// tick, one batch per tick would fall further behind every second. How
/// many units went back.
pub async fn reap(shop: &Shop, listed: &Listed) -> Result<usize, BackendError> {
    let mut back = 0;
    loop {
        let (put_back, full) = reap_batch(shop, listed).await?;
        back += put_back;
        if !full {
            return Ok(back);
        }
    }
}

/// One batch of [`reap`]: how many units went back, and whether the batch
/// was full (more may be due).
async fn reap_batch(shop: &Shop, listed: &Listed) -> Result<(usize, bool), BackendError> {
    let settings = &listed.product.settings;
    let now = shop.backends.clock.now_ms();
    let cutoff = overdue_below(now, settings.pay_within_ms);
    let (book, backends, product) = (listed.store.book(), &shop.backends, &listed.product);
    let full = |orders: &[Order]| orders.len() as i64 >= BATCH;
    match settings.giveback {
        Giveback::NaiveCron => {
            let due = book
                .due(backends, product, Due::Overdue(cutoff), BATCH)
                .await?;
            if due.is_empty() {
                return Ok((0, false));
            }
            lag(now, settings.pay_within_ms, &due);
            Ok((giveback::naive(shop, listed, &due).await?, full(&due)))
        }
        Giveback::StateMachine | Giveback::DelayQueue => {
            // What an earlier pass or a cancel (here or on a dead
            // instance) expired and did not finish, then what is newly
            // due; each unit goes back once, whoever else is finishing it.
            let mut orders = book.due(backends, product, Due::Owed, BATCH).await?;
            let (expired, more) = newly_expired(listed, backends, cutoff).await?;
            lag(now, settings.pay_within_ms, &expired);
            let more = more || full(&orders);
            orders.extend(expired);
            Ok((giveback::after_expiry(shop, listed, &orders).await?, more))
        }
    }
}

/// The overdue holds this pass moved held → expired, and whether its
/// batch was full: the delay queue claims them (`SKIP LOCKED`, so several
/// reapers take different ones); the state machine selects them and keeps
/// those whose compare-and-set it won.
async fn newly_expired(
    listed: &Listed,
    backends: &Backends,
    cutoff: Uuid,
) -> Result<(Vec<Order>, bool), BackendError> {
    let (book, product) = (listed.store.book(), &listed.product);
    if product.settings.giveback == Giveback::DelayQueue {
        let claimed = book.claim(backends, product, cutoff, BATCH).await?;
        let full = claimed.len() as i64 >= BATCH;
        return Ok((claimed, full));
    }
    let mut due = book
        .due(backends, product, Due::Overdue(cutoff), BATCH)
        .await?;
    let full = due.len() as i64 >= BATCH;
    let ids: Vec<Uuid> = due.iter().map(|o| o.order_id).collect();
    let won: HashSet<Uuid> = book.expire(backends, &ids).await?.into_iter().collect();
    due.retain(|o| won.contains(&o.order_id));
    Ok((due, full))
}

/// Records how long after its due time each of `orders` was taken, at
/// `now` (the shared clock's, as their ids' times are).
fn lag(now: u64, pay_within_ms: u64, orders: &[Order]) {
    for order in orders {
        if let Some(due) = pay_by_ms(order.order_id, pay_within_ms) {
            telemetry::reaper_lag(Duration::from_millis(now.saturating_sub(due)));
        }
    }
}
