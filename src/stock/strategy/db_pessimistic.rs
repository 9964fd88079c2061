//! `db-pessimistic`: `SELECT … FOR UPDATE`, update, insert the order,
//! commit — the articles' pessimistic database lock.
//!
//! Known failure: none for correctness; every buyer queues on the row lock,
//! holding a connection and a transaction open for the whole section, so
//! the pool and the row are the ceiling.

use super::Strategy;
use crate::backends::failure::BackendError;
use crate::model::info::{self, Info};
use crate::model::seam::{BuyCtx, Outcome};
use crate::stock::limit;

/// The row-locking strategy.
pub struct DbPessimistic;

impl Strategy for DbPessimistic {
    fn info(&self) -> &'static Info {
        info::entry("db-pessimistic")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        // Not worth queueing on the row lock to be refused under it.
        if limit::already_reached(ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        ctx.rows()?.pessimistic(ctx).await
    }
}
