//! The database strategies' statements in MySQL/InnoDB's dialect (see
//! [`Rows`]), as the articles write them: the same mechanisms as on
//! PostgreSQL, with the orders in MySQL's `orders`.
//!
//! What differs is InnoDB, not the code: its default isolation is
//! REPEATABLE READ, where a locking read (`FOR UPDATE`, an `UPDATE`'s
//! scan) takes next-key locks — the row and the gap before it — that
//! PostgreSQL never takes (docs/scenarios.md measures one consequence).
//! MySQL has no `RETURNING` on `UPDATE`: values come back through
//! `LAST_INSERT_ID(expr)` in the statement's OK packet.

use super::innodb::{self, bind_order};
use crate::backends::failure::{AtCommit, BackendError};
use crate::model::seam::{BuyCtx, Rows, StoreFuture, Written};
use crate::stock::limit;

/// MySQL's statements.
pub struct MysqlRows;

impl Rows for MysqlRows {
    fn atomic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Written> {
        Box::pin(atomic(ctx))
    }

    fn pessimistic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Written> {
        Box::pin(pessimistic(ctx))
    }

    fn versioned<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<(i64, i64)>> {
        Box::pin(versioned(ctx))
    }

    /// The version check, the decrement and the order in one statement,
    /// the buyer's limit included.
    fn compare_and_set<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        version: i64,
    ) -> StoreFuture<'a, Option<Written>> {
        Box::pin(async move {
            Ok(match sell_one(ctx, Some(version)).await? {
                SellOne::Sold(left) => Some(Written::Sold { left: Some(left) }),
                SellOne::NoMatch => None,
                SellOne::LimitReached => Some(Written::LimitReached),
            })
        })
    }

    /// InnoDB never refuses it: the write lands on the newest row.
    fn transaction<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<Written>> {
        Box::pin(async move { transaction(ctx).await.map(Some) })
    }

    fn take_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(take_lock(ctx, name, owner))
    }

    /// A release InnoDB picks as a deadlock's victim is run again:
    /// otherwise the lock would stay held until its lease ran out.
    fn drop_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mysql = ctx.backends.mysql()?;
            innodb::again_if_rolled_back(|| async {
                sqlx::query("DELETE FROM locks WHERE name = ? AND owner = ?")
                    .bind(name)
                    .bind(owner)
                    .execute(mysql)
                    .await?;
                Ok(())
            })
            .await
        })
    }
}

/// What `seckill_sell_one` answered (migration `0002_sell_one.sql`).
enum SellOne {
    /// Sold; the stock left.
    Sold(i64),
    /// No row matched: sold out, reset, or (with a version) written since.
    NoMatch,
    /// The buyer is at `per_user_limit`.
    LimitReached,
}

/// One sale in one round trip: the buyer's count, the conditional
/// decrement (only at `version`, when given) and the order, in one
/// autocommit statement; run again when InnoDB rolled it back (a
/// deadlock's victim sold nothing).
async fn sell_one(ctx: &BuyCtx<'_>, version: Option<i64>) -> Result<SellOne, BackendError> {
    innodb::again_if_rolled_back(|| try_sell_one(ctx, version)).await
}

async fn try_sell_one(ctx: &BuyCtx<'_>, version: Option<i64>) -> Result<SellOne, BackendError> {
    let settings = &ctx.product.settings;
    let code: i64 = sqlx::query_scalar("SELECT seckill_sell_one(?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(ctx.order.order_id)
        .bind(ctx.product.id)
        .bind(ctx.product.epoch)
        .bind(&ctx.order.user_id)
        .bind(&ctx.order.strategy)
        .bind(&ctx.order.served_by)
        .bind(i32::try_from(settings.per_user_limit).unwrap_or(i32::MAX))
        .bind(version.unwrap_or(-1))
        .fetch_one(ctx.backends.mysql()?)
        .await
        .at_commit()?;
    Ok(match code {
        left if left >= 0 => SellOne::Sold(left),
        -4 => SellOne::LimitReached,
        _ => SellOne::NoMatch,
    })
}

/// `db-atomic`: the conditional decrement; with business work, in a
/// transaction that holds the row lock through the work, as on PostgreSQL.
async fn atomic(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    if ctx.product.settings.work_ms == 0 {
        return Ok(match sell_one(ctx, None).await? {
            SellOne::Sold(left) => Written::Sold { left: Some(left) },
            SellOne::NoMatch => Written::SoldOut,
            SellOne::LimitReached => Written::LimitReached,
        });
    }
    let mut tx = ctx.backends.mysql()?.begin().await?;
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    // The stock left comes back as LAST_INSERT_ID, with the row count.
    let done = sqlx::query(
        "UPDATE products SET stock = LAST_INSERT_ID(stock - 1), version = version + 1 \
         WHERE id = ? AND epoch = ? AND stock > 0",
    )
    .bind(ctx.product.id)
    .bind(ctx.product.epoch)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(Written::SoldOut);
    }
    bind_order(ctx).execute(&mut *tx).await?;
    ctx.work().await;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(done.last_insert_id() as i64),
    })
}

/// `db-pessimistic`: `SELECT … FOR UPDATE`, the work, the decrement and
/// the order, then COMMIT.
async fn pessimistic(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mut tx = ctx.backends.mysql()?.begin().await?;
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = ? AND epoch = ? FOR UPDATE")
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
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    sqlx::query("UPDATE products SET stock = stock - 1, version = version + 1 WHERE id = ?")
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    bind_order(ctx).execute(&mut *tx).await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(stock - 1),
    })
}

/// `db-optimistic`'s read: the stock and its version, `None` once the
/// product was reset. A plain autocommit read: its own snapshot, so the
/// isolation level does not stale it.
async fn versioned(ctx: &BuyCtx<'_>) -> Result<Option<(i64, i64)>, BackendError> {
    Ok(
        sqlx::query_as("SELECT stock, version FROM products WHERE id = ? AND epoch = ?")
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .fetch_optional(ctx.backends.mysql()?)
            .await?,
    )
}

/// The same transaction on InnoDB, at the same isolation level, named
/// for this transaction rather than left to the server's default.
async fn transaction(ctx: &BuyCtx<'_>) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mut tx = ctx
        .backends
        .mysql()?
        .begin_with("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION")
        .await?;
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = ? AND epoch = ?")
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
    sqlx::query("UPDATE products SET stock = ?, version = version + 1 WHERE id = ?")
        .bind(stock - 1)
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    bind_order(ctx).execute(&mut *tx).await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(stock - 1),
    })
}

/// Takes a free lock: the unique name makes the INSERT the acquisition;
/// `IGNORE` turns the duplicate name into "no
/// row inserted" (an upsert would answer 1 either way: sqlx counts found
/// rows).
const MYSQL_INSERT_SQL: &str = "INSERT IGNORE INTO locks (name, owner, lease_ms, acquired_at) \
     VALUES (?, ?, ?, NOW(6))";

/// Takes over a stale lock (a crashed holder's): only a row past its
/// lease matches.
const MYSQL_TAKE_OVER_SQL: &str = "UPDATE locks SET owner = ?, lease_ms = ?, acquired_at = NOW(6) \
     WHERE name = ? AND acquired_at + INTERVAL lease_ms * 1000 MICROSECOND < NOW(6)";

/// Tries once to take the lock, as `owner`, in MySQL's table. InnoDB
/// deadlocks here under contention (the duplicate-key check takes a shared
/// lock on the held row, which the holder's DELETE then waits for): the
/// victim took nothing, and tries again like any waiter.
async fn take_lock(ctx: &BuyCtx<'_>, name: &str, owner: &str) -> Result<bool, BackendError> {
    match try_take_lock(ctx, name, owner).await {
        Err(error) if innodb::rolled_back(&error) => Ok(false),
        taken => taken,
    }
}

async fn try_take_lock(ctx: &BuyCtx<'_>, name: &str, owner: &str) -> Result<bool, BackendError> {
    let mysql = ctx.backends.mysql()?;
    let lease = ctx.product.settings.lease_ms as i64;
    let inserted = sqlx::query(MYSQL_INSERT_SQL)
        .bind(name)
        .bind(owner)
        .bind(lease)
        .execute(mysql)
        .await?
        .rows_affected();
    if inserted == 1 {
        return Ok(true);
    }
    let taken = sqlx::query(MYSQL_TAKE_OVER_SQL)
        .bind(owner)
        .bind(lease)
        .bind(name)
        .execute(mysql)
        .await?
        .rows_affected();
    Ok(taken == 1)
}
