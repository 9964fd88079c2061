//! The critical section every locked strategy shares: read the stock, check
//! it, do `work_ms` of simulated business work, write `stock - 1` and record
//! the order. Written once so that the locks differ only in how they lock.

use std::time::Duration;

use super::{BuyCtx, Outcome};
use crate::error::BackendError;
use crate::store;

/// Runs the section. The caller holds whatever lock it has (or none).
pub async fn run(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let id = ctx.product.id;
    let stock = {
        let mut conn = ctx.redis.clone();
        store::read(&mut conn, id).await?
    };
    if stock <= 0 {
        return Ok(Outcome::SoldOut);
    }
    // The connection goes back to the pool during the work: a sleeping
    // buyer must not starve the others of connections.
    work(ctx).await;
    let mut conn = ctx.redis.clone();
    if store::write(&mut conn, ctx, stock - 1).await? {
        Ok(Outcome::Sold)
    } else {
        Ok(Outcome::busy("the product was reset during the buy"))
    }
}

/// Sleeps `work_ms`: the simulated business work inside the section.
pub async fn work(ctx: &BuyCtx<'_>) {
    let ms = ctx.product.settings.work_ms;
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
