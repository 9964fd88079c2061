//! The database strategies' statements in PostgreSQL's dialect (see
//! [`Rows`]): `RETURNING` hands values back in the statement's own round
//! trip, and a CTE lets one statement decrement and insert the order.

use sqlx::Row;

use crate::backends::failure::{AtCommit, BackendError};
use crate::model::order::{INSERT_SQL, insert_if_sold};
use crate::model::seam::{BuyCtx, Rows, StoreFuture, Written};
use crate::stock::limit;

/// Decrement and insert in one statement: the CTE's UPDATE yields a row only
/// when stock was left, and the INSERT records an order only for that row.
const SELL_SQL: &str = insert_if_sold!(
    "UPDATE products SET stock = stock - 1 WHERE id = $2 AND epoch = $3 AND stock > 0 RETURNING stock"
);

/// The same sale with the buyer's limit, in one call (migration 0004).
const SELL_ONE_SQL: &str =
    "SELECT verdict, stock_left FROM seckill_sell_one($1, $2, $3, $4, $5, $6, $7)";

/// The compare-and-set: the UPDATE matches only if nobody wrote since our
/// read (same version, same reset); the INSERT records the order only then.
const CAS_SQL: &str = insert_if_sold!(
    "UPDATE products SET stock = stock - 1, version = version + 1 \
     WHERE id = $2 AND epoch = $3 AND version = $7 AND stock > 0 RETURNING stock"
);

/// Takes a free lock: the unique name makes the INSERT the acquisition.
/// `DO NOTHING` checks the index without locking a held row, so waiters do
/// not queue on the holder's row lock.
const LOCK_INSERT_SQL: &str = "INSERT INTO locks (name, owner, lease_ms, acquired_at) \
     VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name) DO NOTHING RETURNING owner";

/// Takes over a stale lock (a crashed holder's): only a row past its lease
/// matches the `WHERE`, so a live holder's row is never touched.
const LOCK_TAKE_OVER_SQL: &str = "UPDATE locks SET owner = $2, lease_ms = $3, acquired_at = clock_timestamp() \
     WHERE name = $1 AND acquired_at + lease_ms * interval '1 millisecond' < clock_timestamp() \
     RETURNING owner";

/// PostgreSQL's statements.
pub struct PgRows;

impl Rows for PgRows {
    fn atomic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Written> {
        Box::pin(atomic(ctx))
    }

    fn pessimistic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Written> {
        Box::pin(pessimistic(ctx))
    }

    fn versioned<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<(i64, i64)>> {
        Box::pin(async move {
            Ok(
                sqlx::query_as("SELECT stock, version FROM products WHERE id = $1 AND epoch = $2")
                    .bind(ctx.product.id)
                    .bind(ctx.product.epoch)
                    .fetch_optional(&ctx.backends.pg)
                    .await?,
            )
        })
    }

    fn compare_and_set<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        version: i64,
    ) -> StoreFuture<'a, Option<Written>> {
        Box::pin(compare_and_set(ctx, version))
    }

    fn transaction<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<Written>> {
        Box::pin(async move {
            // A serialization failure of any statement (the stock's UPDATE,
            // or the buyer's count) rolled the whole transaction back.
            match transaction(ctx).await {
                Err(BackendError::Sql(sqlx::Error::Database(db)))
                    if db.code().as_deref() == Some("40001") =>
                {
                    Ok(None)
                }
                done => done.map(Some),
            }
        })
    }

    fn take_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            for sql in [LOCK_INSERT_SQL, LOCK_TAKE_OVER_SQL] {
                let took: Option<String> = sqlx::query_scalar(sql)
                    .bind(name)
                    .bind(owner)
                    .bind(ctx.product.settings.lease_ms as i64)
                    .fetch_optional(&ctx.backends.pg)
                    .await?;
                if took.is_some() {
                    return Ok(true);
                }
            }
            Ok(false)
        })
    }

    fn drop_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM locks WHERE name = $1 AND owner = $2")
                .bind(name)
                .bind(owner)
                .execute(&ctx.backends.pg)
                .await?;
            Ok(())
        })
    }
}

/// `db-atomic` on PostgreSQL: one statement without a limit, one function
/// call with one (`seckill_sell_one`, migration 0004: the hot row's lock
/// held for no network round trip), a transaction holding the row lock
/// through the work with `work_ms`.
async fn atomic(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    let sell = ctx.order.bind_insert(sqlx::query(SELL_SQL));
    let settings = &ctx.product.settings;
    if settings.work_ms == 0 && settings.per_user_limit == 0 {
        // One round trip: the statement is its own transaction.
        let left: Option<i64> = sell
            .fetch_optional(&ctx.backends.pg)
            .await
            .at_commit()?
            .map(|row| row.get(0));
        return Ok(left.map_or(Written::SoldOut, |left| Written::Sold { left: Some(left) }));
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
        return Written::from_reply(&[verdict.into(), left.unwrap_or_default()]);
    }
    let mut tx = ctx.backends.pg.begin().await?;
    // The buyer's row first: it is locked only against the same buyer's
    // requests, so the hot product row is not held any longer.
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    let Some(row) = sell.fetch_optional(&mut *tx).await? else {
        return Ok(Written::SoldOut);
    };
    let left: i64 = row.get(0);
    // Business work inside the transaction holds the row lock, as a real
    // order service would.
    ctx.work().await;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold { left: Some(left) })
}

/// `db-pessimistic` on PostgreSQL.
async fn pessimistic(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mut tx = ctx.backends.pg.begin().await?;
    // FOR UPDATE takes the row lock now, so no other buyer can read this
    // stock until we commit: the read and the write cannot be interleaved
    // by anyone else.
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = $1 AND epoch = $2 FOR UPDATE")
            .bind(product.id)
            .bind(product.epoch)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(stock) = stock else {
        return Ok(Written::Reset);
    };
    if stock <= 0 {
        return Ok(Written::SoldOut);
    }
    ctx.work().await;
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    sqlx::query("UPDATE products SET stock = stock - 1 WHERE id = $1")
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    ctx.order
        .bind_insert(sqlx::query(INSERT_SQL))
        .execute(&mut *tx)
        .await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(stock - 1),
    })
}

/// The CAS with the order; with a per-user limit, the buyer's unit is
/// claimed in the same transaction (and rolled back with a lost CAS).
async fn compare_and_set(ctx: &BuyCtx<'_>, version: i64) -> Result<Option<Written>, BackendError> {
    let cas = ctx.order.bind_insert(sqlx::query(CAS_SQL)).bind(version);
    if ctx.product.settings.per_user_limit == 0 {
        let left = cas.fetch_optional(&ctx.backends.pg).await.at_commit()?;
        return Ok(left.map(|row| Written::Sold {
            left: Some(row.get(0)),
        }));
    }
    let mut tx = ctx.backends.pg.begin().await?;
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Some(Written::LimitReached));
    }
    let Some(row) = cas.fetch_optional(&mut *tx).await? else {
        return Ok(None);
    };
    let left: i64 = row.get(0);
    tx.commit().await.at_commit()?;
    Ok(Some(Written::Sold { left: Some(left) }))
}

/// `db-transaction` on PostgreSQL: snapshot isolation, first updater wins.
async fn transaction(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mut tx = ctx
        .backends
        .pg
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await?;
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = $1 AND epoch = $2")
            .bind(product.id)
            .bind(product.epoch)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(stock) = stock else {
        return Ok(Written::Reset);
    };
    if stock <= 0 {
        return Ok(Written::SoldOut);
    }
    ctx.work().await;
    sqlx::query("UPDATE products SET stock = $1 WHERE id = $2")
        .bind(stock - 1)
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    ctx.order
        .bind_insert(sqlx::query(INSERT_SQL))
        .execute(&mut *tx)
        .await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(stock - 1),
    })
}
