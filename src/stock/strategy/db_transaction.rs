//! `db-transaction`: the whole section in one REPEATABLE READ transaction
//! and nothing else — read the stock with a plain `SELECT`, work, write
//! back the value read minus one, insert the order, commit. The articles'
//! "the method is `@Transactional`, so it is safe" belief.
//!
//! Whether it holds depends on the database, not on the code:
//! - PostgreSQL's REPEATABLE READ is snapshot isolation with "first
//!   updater wins": a transaction that writes a row another committed
//!   since its snapshot fails (SQLSTATE 40001). Nothing was written; the
//!   buyer's transaction is run again from a new snapshot, up to
//!   `max_retries` times (then `busy`). No oversell.
//! - InnoDB's REPEATABLE READ reads from the snapshot but writes on top
//!   of the newest row (an `UPDATE` is a "current read"), so the second
//!   writer overwrites the first's decrement with the same value: a lost
//!   update, and one order more than the stock. (MariaDB 11.8 turns on
//!   `innodb_snapshot_isolation`, which refuses that write as PostgreSQL
//!   does; the 10.11 Debian ships and the lab runs does not.)
//!
//! Its own store is MySQL, the articles' database, where it fails; the
//! comparison races it on PostgreSQL too (`db-transaction@postgres`), and
//! the `repeatable-read` scenario races it on both with the same settings.

use std::time::{Duration, Instant};

use super::Strategy;
use crate::backends::failure::BackendError;
use crate::model::backoff;
use crate::model::info::{self, Info};
use crate::model::seam::{BuyCtx, Outcome};

/// The transaction-only strategy.
pub struct DbTransaction;

impl Strategy for DbTransaction {
    fn info(&self) -> &'static Info {
        info::entry("db-transaction")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let rows = ctx.rows()?;
        for attempt in 0..=ctx.product.settings.max_retries {
            if let Some(outcome) = rows.transaction(ctx).await? {
                return Ok(outcome);
            }
            // A serialization failure: nothing was written; run it again
            // from a new snapshot.
            let cap = Instant::now() + Duration::from_millis(8);
            tokio::time::sleep(backoff::delay(attempt, cap)).await;
        }
        Ok(Outcome::busy(
            "serialization failure max_retries times: others kept writing first",
        ))
    }
}
