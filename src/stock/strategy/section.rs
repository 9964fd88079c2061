//! The critical section every locked strategy shares: read the stock, check
//! it, do `work_ms` of simulated business work, write `stock - 1` and record
//! the order. Outcome once so that the locks differ only in how they lock,
//! and on the product's store, so that they differ in nothing else.

use super::Outcome;
use crate::backends::failure::BackendError;
use crate::model::seam::BuyCtx;

/// Runs the section on the store's counter `cell`, passing the lock's
/// fencing token (if any) to the store. The caller holds whatever lock it
/// has (or none).
pub async fn run(
    ctx: &BuyCtx<'_>,
    cell: usize,
    fence: Option<u64>,
) -> Result<Outcome, BackendError> {
    let stock = ctx.store.read(ctx, cell, fence).await?;
    if stock <= 0 {
        return Ok(Outcome::SoldOut);
    }
    ctx.work().await;
    ctx.store.write(ctx, cell, stock - 1, fence).await
}
