//! The critical section every locked strategy shares: read the stock, check
//! it, do `work_ms` of simulated business work, write `stock - 1` and record
//! the order. Written once so that the locks differ only in how they lock.

use std::time::Duration;

use super::Outcome;
use crate::error::BackendError;
use crate::sale::BuyCtx;
use crate::store::{self, Cell};

/// Runs the section on `cell`, passing the lock's fencing token (if any)
/// to the store. The caller holds whatever lock it has (or none).
pub async fn run(
    ctx: &BuyCtx<'_>,
    cell: &Cell,
    fence: Option<u64>,
) -> Result<Outcome, BackendError> {
    let stock = store::read(ctx, cell, fence).await?;
    if stock <= 0 {
        return Ok(Outcome::SoldOut);
    }
    work(ctx).await;
    Ok(store::write(ctx, cell, stock - 1, fence).await?.into())
}

/// Sleeps `work_ms`: the simulated business work inside the section.
pub async fn work(ctx: &BuyCtx<'_>) {
    let ms = ctx.product.settings.work_ms;
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
