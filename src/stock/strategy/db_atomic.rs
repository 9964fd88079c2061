//! `db-atomic`: `UPDATE products SET stock = stock - 1 WHERE id = $1 AND
//! stock > 0` with the order inserted by the same statement — the database
//! does the check and the decrement under its own row lock.
//!
//! With a per-buyer limit it calls `seckill_sell_one` (migration 0004):
//! the buyer's count, the decrement and the order in one function call,
//! its own transaction, so the hot row's lock is held for no network round
//! trip, as without a limit. (It was a transaction of an upsert, the
//! statement and a COMMIT: three round trips with the row locked for two.)
//!
//! Known failure: none for correctness; every buyer queues on one hot row,
//! so PostgreSQL's commit rate is the ceiling (`db-group` sells many
//! buyers per commit).

use super::Strategy;
use crate::backends::failure::BackendError;
use crate::model::info::{self, Info};
use crate::model::seam::{BuyCtx, Outcome};

/// The conditional-update strategy.
pub struct DbAtomic;

impl Strategy for DbAtomic {
    fn info(&self) -> &'static Info {
        info::entry("db-atomic")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        ctx.rows()?.atomic(ctx).await
    }
}
