//! The database strategies on MySQL/InnoDB (`store: mysql`), as the
//! articles write them: the same mechanisms as on PostgreSQL, in MySQL's
//! dialect, with the orders in MySQL's `orders`.
//!
//! What differs is InnoDB, not the code: its default isolation is
//! REPEATABLE READ, where a locking read (`FOR UPDATE`, an `UPDATE`'s
//! scan) takes next-key locks — the row and the gap before it — that
//! PostgreSQL never takes (docs/scenarios.md measures one consequence).

use super::Outcome;
use super::section;
use crate::error::{AtCommit, BackendError};
use crate::limit;
use crate::sale::BuyCtx;
use crate::store::mysql_store::{self, bind_order};

/// What `seckill_sell_one` answered (migration `0002_sell_one.sql`).
pub enum Sold {
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
pub async fn sell_one(ctx: &BuyCtx<'_>, version: Option<i64>) -> Result<Sold, BackendError> {
    mysql_store::again_if_rolled_back(|| try_sell_one(ctx, version)).await
}

async fn try_sell_one(ctx: &BuyCtx<'_>, version: Option<i64>) -> Result<Sold, BackendError> {
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
        left if left >= 0 => Sold::Sold(left),
        -4 => Sold::LimitReached,
        _ => Sold::NoMatch,
    })
}

/// `db-atomic`: the conditional decrement; with business work, in a
/// transaction that holds the row lock through the work, as on PostgreSQL.
pub async fn atomic(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    if ctx.product.settings.work_ms == 0 {
        return Ok(match sell_one(ctx, None).await? {
            Sold::Sold(left) => Outcome::Sold { left: Some(left) },
            Sold::NoMatch => Outcome::SoldOut,
            Sold::LimitReached => Outcome::LimitReached,
        });
    }
    let mut tx = ctx.backends.mysql()?.begin().await?;
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
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
        return Ok(Outcome::SoldOut);
    }
    bind_order(ctx).execute(&mut *tx).await?;
    section::work(ctx).await;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold {
        left: Some(done.last_insert_id() as i64),
    })
}

/// `db-pessimistic`: `SELECT … FOR UPDATE`, the work, the decrement and
/// the order, then COMMIT.
pub async fn pessimistic(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let product = ctx.product;
    let mut tx = ctx.backends.mysql()?.begin().await?;
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = ? AND epoch = ? FOR UPDATE")
            .bind(product.id)
            .bind(product.epoch)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(stock) = stock else {
        return Ok(Outcome::busy("the product was reset during the buy"));
    };
    if stock <= 0 {
        return Ok(Outcome::SoldOut);
    }
    section::work(ctx).await;
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    sqlx::query("UPDATE products SET stock = stock - 1, version = version + 1 WHERE id = ?")
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    bind_order(ctx).execute(&mut *tx).await?;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold {
        left: Some(stock - 1),
    })
}

/// `db-optimistic`'s read: the stock and its version, `None` once the
/// product was reset. A plain autocommit read: its own snapshot, so the
/// isolation level does not stale it.
pub async fn versioned(ctx: &BuyCtx<'_>) -> Result<Option<(i64, i64)>, BackendError> {
    Ok(
        sqlx::query_as("SELECT stock, version FROM products WHERE id = ? AND epoch = ?")
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .fetch_optional(ctx.backends.mysql()?)
            .await?,
    )
}
