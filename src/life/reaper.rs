//! The reaper: a task in every instance that gives overdue holds back, by
//! each product's mechanism, every [`TICK`]. Several instances reap at
//! once on purpose (no leader to lose): the state machine's conditional
//! updates and the delay queue's `SKIP LOCKED` claims keep them from
//! giving one unit back twice; the naive job does not, which is its
//! failure.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::backends::error::BackendError;
use crate::product::life::{Giveback, overdue_below};
use crate::product::now_ms;
use crate::products::{self, Listed};
use crate::purchase::Shop;
use crate::sale::Due;

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
    while !*stopping.borrow() {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(error) = pass(&shop).await {
                    tracing::warn!(%error, "reaper pass failed");
                }
            }
            _ = stopping.changed() => {}
        }
    }
}

/// One pass over every product that takes payment, all at once (one
/// product's pause or slow lock holds up no other).
async fn pass(shop: &Shop) -> Result<(), BackendError> {
    let products = products::all(&shop.backends).await?;
    let reaps = products
        .into_iter()
        .filter(|p| p.settings.pay_within_ms > 0)
        .map(|product| async move {
            let id = product.id;
            let reaped = match Listed::new(&shop.catalogue, product) {
                Ok(listed) => reap(shop, &listed).await,
                Err(error) => Err(error),
            };
            if let Err(error) = reaped {
                tracing::warn!(%error, product = id, "giving overdue holds back failed");
            }
        });
    futures::future::join_all(reaps).await;
    Ok(())
}

/// Gives `listed`'s overdue holds back; how many units went back.
pub async fn reap(shop: &Shop, listed: &Listed) -> Result<usize, BackendError> {
    let settings = &listed.product.settings;
    let cutoff = overdue_below(now_ms(), settings.pay_within_ms);
    let (book, backends, product) = (listed.store.book(), &shop.backends, &listed.product);
    let mut back = 0;
    match settings.giveback {
        Giveback::NaiveCron => {
            let due = book
                .due(backends, product, Due::Overdue(cutoff), BATCH)
                .await?;
            if !due.is_empty() {
                back += giveback::naive(shop, listed, &due).await?;
            }
        }
        Giveback::StateMachine => {
            let due = book.due(backends, product, Due::Overdue(cutoff), BATCH);
            let mut won = Vec::new();
            for order in due.await? {
                if book.expire(backends, order.order_id).await? {
                    won.push(order);
                }
            }
            back += giveback::after_expiry(shop, listed, &won).await?;
        }
        Giveback::DelayQueue => {
            // What an earlier pass (here or on a dead instance) expired
            // and did not finish, then what is newly due.
            let mut orders = book.due(backends, product, Due::Owed, BATCH).await?;
            orders.extend(book.claim(backends, product, cutoff, BATCH).await?);
            back += giveback::after_expiry(shop, listed, &orders).await?;
        }
    }
    Ok(back)
}
