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

use sqlx::Row;

use super::{Outcome, Strategy, on_mysql, section, store_of};
use crate::error::{AtCommit, BackendError};
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::orders::insert_if_sold;
use crate::product::StoreKind;
use crate::sale::BuyCtx;
use crate::store::Written;

/// Decrement and insert in one statement: the CTE's UPDATE yields a row only
/// when stock was left, and the INSERT records an order only for that row.
const SELL_SQL: &str = insert_if_sold!(
    "UPDATE products SET stock = stock - 1 WHERE id = $2 AND epoch = $3 AND stock > 0 RETURNING stock"
);

/// The same sale with the buyer's limit, in one call (migration 0004).
const SELL_ONE_SQL: &str =
    "SELECT verdict, stock_left FROM seckill_sell_one($1, $2, $3, $4, $5, $6, $7)";

/// The conditional-update strategy.
pub struct DbAtomic;

const INFO: Info = Info {
    id: "db-atomic",
    backend: "postgres",
    store: StoreKind::Postgres,
    stores: &[StoreKind::Postgres, StoreKind::Mysql],
    mechanism: "UPDATE … SET stock = stock - 1 WHERE id = $1 AND stock > 0, order inserted in the same statement",
    safe: true,
    safe_against: "any concurrency, any number of instances, crashed clients",
    unsafe_against: "nothing for correctness; throughput is bounded by one hot row",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::SellsAll),
        (Hazard::RepeatableRead, Expect::SellsAll),
    ],
    recipes: &[],
};

impl Strategy for DbAtomic {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        if store_of(&INFO, ctx.product) == StoreKind::Mysql {
            return on_mysql::atomic(ctx).await;
        }
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
        if settings.work_ms == 0 {
            // One round trip: the function call is its own transaction.
            let (verdict, left): (i16, Option<i64>) = sqlx::query_as(SELL_ONE_SQL)
                .bind(ctx.order.order_id)
                .bind(ctx.product.id)
                .bind(ctx.product.epoch)
                .bind(&ctx.order.user_id)
                .bind(&ctx.order.strategy)
                .bind(&ctx.order.served_by)
                .bind(i32::try_from(settings.per_user_limit).unwrap_or(i32::MAX))
                .fetch_one(&ctx.backends.pg)
                .await
                .at_commit()?;
            return Ok(Written::from_reply(&[verdict.into(), left.unwrap_or_default()])?.into());
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
