//! `db-optimistic`: read stock and version, then `UPDATE … WHERE version =
//! $v` (compare-and-set), retried a bounded number of times — the articles'
//! optimistic lock.
//!
//! Known failure: none for correctness, but under contention most updates
//! lose the race; buyers that exhaust `max_retries` give up as `busy`, so
//! it may sell fewer units than a queueing strategy in the same time.

use std::time::{Duration, Instant};

use super::Strategy;
use crate::backends::failure::BackendError;
use crate::model::backoff;
use crate::model::info::{self, Info};
use crate::model::seam::{BuyCtx, Outcome};

/// The optimistic-version strategy.
pub struct DbOptimistic;

impl Strategy for DbOptimistic {
    fn info(&self) -> &'static Info {
        info::entry("db-optimistic")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let rows = ctx.rows()?;
        for attempt in 0..=ctx.product.settings.max_retries {
            let Some((stock, version)) = rows.versioned(ctx).await? else {
                return Ok(Outcome::busy("the product was reset during the buy"));
            };
            if stock <= 0 {
                return Ok(Outcome::SoldOut);
            }
            ctx.work().await;
            if let Some(outcome) = rows.compare_and_set(ctx, version).await? {
                return Ok(outcome);
            }
            // Somebody wrote since our read. Retries are bounded by count;
            // each pause is a few ms of jitter so the losers do not
            // collide again in lock-step.
            let cap = Instant::now() + Duration::from_millis(8);
            tokio::time::sleep(backoff::delay(attempt, cap)).await;
        }
        Ok(Outcome::busy("optimistic update lost max_retries times"))
    }
}
