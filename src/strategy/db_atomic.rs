//! `db-atomic`: `UPDATE products SET stock = stock - 1 WHERE id = $1 AND
//! stock > 0` with the order inserted by the same statement — the database
//! does the check and the decrement under its own row lock.
//!
//! Known failure: none for correctness; every buyer queues on one hot row,
//! so PostgreSQL's commit rate is the ceiling.

use sqlx::Row;

use super::{Outcome, Strategy, section};
use crate::error::{AtCommit, BackendError};
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::orders::insert_if_sold;
use crate::product::StoreKind;
use crate::sale::BuyCtx;

/// Decrement and insert in one statement: the CTE's UPDATE yields a row only
/// when stock was left, and the INSERT records an order only for that row.
const SELL_SQL: &str = insert_if_sold!(
    "UPDATE products SET stock = stock - 1 WHERE id = $2 AND epoch = $3 AND stock > 0 RETURNING stock"
);

/// The conditional-update strategy.
pub struct DbAtomic;

const INFO: Info = Info {
    id: "db-atomic",
    backend: "postgres",
    store: StoreKind::Postgres,
    mechanism: "UPDATE … SET stock = stock - 1 WHERE id = $1 AND stock > 0, order inserted in the same statement",
    safe: true,
    safe_against: "any concurrency, any number of instances, crashed clients",
    unsafe_against: "nothing for correctness; throughput is bounded by one hot row",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::SellsAll),
    ],
};

impl Strategy for DbAtomic {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let sell = ctx.order.bind_insert(sqlx::query(SELL_SQL));
        let settings = &ctx.product.settings;
        if settings.work_ms == 0 && settings.per_user_limit == 0 {
            // One round trip: the statement is its own transaction.
            let left: Option<i64> = sell
                .fetch_optional(&ctx.backends.pg)
                .await
                .at_commit()?
                .map(|row| row.get(0));
            return Ok(left.map_or(Outcome::SoldOut, |left| Outcome::Sold { left: Some(left) }));
        }
        let mut tx = ctx.backends.pg.begin().await?;
        // The buyer's row first: it is locked only against the same
        // buyer's requests, so the hot product row is not held any longer.
        if !limit::claim_pg(&mut tx, ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        let Some(row) = sell.fetch_optional(&mut *tx).await? else {
            return Ok(Outcome::SoldOut);
        };
        let left: i64 = row.get(0);
        // Business work inside the transaction holds the row lock, as a
        // real order service would.
        section::work(ctx).await;
        tx.commit().await.at_commit()?;
        Ok(Outcome::Sold { left: Some(left) })
    }
}
