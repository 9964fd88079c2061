//! The give-back mechanisms' steps ([`crate::model::product::hold_terms::Giveback`]):
//! how an expired hold's unit goes back on sale, once the hold was found
//! overdue (the reaper) or cancelled (its buyer).

use std::time::Duration;

use uuid::Uuid;

use crate::backends::failure::BackendError;
use crate::model::order::Order;
use crate::sale::Shop;
use crate::sale::memory;
use crate::sale::product_store::Listed;

/// The naive job's steps for `orders`: every unit put back with no state
/// check, then — after the `reaper_pause_ms` knob — every order marked
/// returned, whatever happened to it meanwhile. How many units went back.
pub async fn naive(shop: &Shop, listed: &Listed, orders: &[Order]) -> Result<usize, BackendError> {
    let back = put_back(shop, listed, orders, false).await?;
    pause(listed).await;
    let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
    listed
        .store
        .book()
        .returned(&shop.backends, &ids, true)
        .await?;
    announce(shop, listed, back).await;
    Ok(back)
}

/// The state machine's steps after this caller won `held → expired` for
/// `orders` (or found them expired and owed): after the pause, each unit
/// put back once and its order marked returned. How many units this call
/// put back.
pub async fn after_expiry(
    shop: &Shop,
    listed: &Listed,
    orders: &[Order],
) -> Result<usize, BackendError> {
    if orders.is_empty() {
        return Ok(0);
    }
    pause(listed).await;
    settle_owed(shop, listed, orders).await
}

/// Each of `orders` (expired, their units owed) put back once and marked
/// returned, with no pause: the second half of [`after_expiry`], and
/// reconciliation's way with owed units. The units go back together (one
/// write of a database row per batch), then the orders are marked
/// together (a Redis counter's marker is not the order's state). How
/// many units went back.
pub async fn settle_owed(
    shop: &Shop,
    listed: &Listed,
    orders: &[Order],
) -> Result<usize, BackendError> {
    if orders.is_empty() {
        return Ok(0);
    }
    let back = put_back(shop, listed, orders, true).await?;
    let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
    listed
        .store
        .book()
        .returned(&shop.backends, &ids, false)
        .await?;
    announce(shop, listed, back).await;
    Ok(back)
}

/// Puts the units of `orders` back through the product's strategy.
async fn put_back(
    shop: &Shop,
    listed: &Listed,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    let Some(first) = orders.first() else {
        return Ok(0);
    };
    let lane = shop.backends.lane.get().await?;
    let ctx = listed.ctx(lane.conn.clone(), first, &shop.backends);
    listed.strategy.restock(&ctx, orders, once).await
}

/// The knob between the steps.
async fn pause(listed: &Listed) {
    let ms = listed.product.settings.reaper_pause_ms;
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Units went back: every instance forgets that the product sold out.
async fn announce(shop: &Shop, listed: &Listed, back: usize) {
    if back == 0 {
        return;
    }
    super::noted(shop, listed, "given_back", back as u64);
    let id = listed.product.id;
    shop.memory.sold_out.clear(id);
    // A pooled connection of its own: the acknowledgements are awaited
    // with BLPOP, which would hold up the buy path's shared lane.
    let told = match shop.backends.redis.get().await {
        Ok(mut conn) => memory::broadcast_restock(&mut conn, id).await,
        Err(error) => Err(BackendError::from(error)),
    };
    if let Err(error) = told {
        // The flags expire by themselves (memory::FLAG_TTL).
        tracing::warn!(%error, product = id, "a restock was not announced");
    }
}
