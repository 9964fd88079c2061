//! The MySQL store: the product's row in MySQL's `products`, written in one
//! InnoDB transaction with the order's INSERT into MySQL's `orders` — the
//! articles' own setup, under whichever lock guards it.
//!
//! MySQL has no `RETURNING` on `UPDATE`; a statement hands a value back
//! through `LAST_INSERT_ID(expr)` instead, which the server returns in the
//! statement's OK packet (the classic MySQL sequence idiom): one round trip,
//! as PostgreSQL's `RETURNING`.

use std::time::Duration;

use sqlx::MySqlPool;
use uuid::Uuid;

use super::innodb::{again_if_rolled_back, bind_order};
use super::mysql_book::MysqlBook;
use super::mysql_rows::MysqlRows;
use crate::backends::conn::RedisConn;
use crate::backends::failure::{AtCommit, BackendError};
use crate::backends::{Backends, Footprint};
use crate::model::order::Order;
use crate::model::product::shares::through;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{Book, BuyCtx, Mark, Rows, Store, StoreFuture, Written};
use crate::stock::limit;

/// A product's stock in MySQL's `products` row, its orders in MySQL's
/// `orders` (the product's definition stays in PostgreSQL).
pub struct MysqlStore;

impl Store for MysqlStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Mysql
    }

    fn orders_in(&self) -> StoreKind {
        StoreKind::Mysql
    }

    fn rows(&self) -> Option<&'static dyn Rows> {
        Some(&MysqlRows)
    }

    fn lock_table(&self) -> &'static dyn Rows {
        &MysqlRows
    }

    fn book(&self) -> &'static dyn Book {
        &MysqlBook
    }

    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        orders: &'a [Order],
        once: bool,
    ) -> StoreFuture<'a, usize> {
        Box::pin(super::mysql_book::restock(ctx, orders, once))
    }

    fn set_stock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(super::mysql_book::set_stock(ctx, expected, stock))
    }

    fn recheck_every(&self) -> Duration {
        Duration::from_millis(250)
    }

    fn read<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        fence: Option<u64>,
    ) -> StoreFuture<'a, i64> {
        Box::pin(read(ctx, fence))
    }

    fn write<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        new_stock: i64,
        fence: Option<u64>,
    ) -> StoreFuture<'a, Written> {
        Box::pin(write(ctx, new_stock, fence))
    }

    fn bought<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let held: Option<i64> = sqlx::query_scalar(
                "SELECT CAST(bought AS SIGNED) FROM buyer_counts \
                 WHERE product_id = ? AND epoch = ? AND user_id = ?",
            )
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .bind(&ctx.order.user_id)
            .fetch_optional(ctx.backends.mysql()?)
            .await?;
            Ok(held.unwrap_or(0))
        })
    }

    /// A MySQL-stored sale inserts its order in its own transaction, into
    /// MySQL's `orders`: that is the one place to look.
    fn find_order<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        _product: &'a Product,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Order>> {
        Box::pin(async move {
            let stored: Option<(i64, i64, String, String, String)> = sqlx::query_as(
                "SELECT product_id, epoch, user_id, strategy, served_by FROM orders \
                 WHERE order_id = ?",
            )
            .bind(order_id)
            .fetch_optional(backends.mysql()?)
            .await?;
            Ok(
                stored.map(|(product_id, epoch, user_id, strategy, served_by)| Order {
                    order_id,
                    product_id,
                    epoch,
                    user_id,
                    strategy,
                    served_by,
                }),
            )
        })
    }

    fn release<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        product: &'a Product,
        due: u32,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            // MySQL has no arrays: the cumulative shares as a JSON array,
            // indexed by the waves the row holds (`stock` is assigned
            // first, so it reads the old `waves_released`).
            let through = &through(product.initial, product.settings.waves, 1)[0];
            sqlx::query(
                "UPDATE products SET stock = stock + ? - JSON_EXTRACT(?, CONCAT('$[', waves_released, ']')), \
                 waves_released = ?, version = version + 1 \
                 WHERE id = ? AND epoch = ? AND waves_released < ?",
            )
            .bind(through[due as usize])
            .bind(serde_json::to_string(through).unwrap_or_default())
            .bind(due as i32)
            .bind(product.id)
            .bind(product.epoch)
            .bind(due as i32)
            .execute(backends.mysql()?)
            .await?;
            Ok(())
        })
    }

    fn waves_held<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
    ) -> StoreFuture<'a, Vec<u32>> {
        Box::pin(async move {
            let held: Option<i32> =
                sqlx::query_scalar("SELECT waves_released FROM products WHERE id = ?")
                    .bind(product.id)
                    .fetch_optional(backends.mysql()?)
                    .await?;
            Ok(vec![held.unwrap_or(1).max(1) as u32])
        })
    }

    /// Never in a stream: MySQL's own `orders`.
    fn orders<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        _in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)> {
        Box::pin(async move {
            let in_table: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM orders WHERE product_id = ? AND epoch = ?",
            )
            .bind(product.id)
            .bind(product.epoch)
            .fetch_one(backends.mysql()?)
            .await?;
            Ok((in_table, 0))
        })
    }

    fn mark<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Mark> {
        Box::pin(async move {
            let row: Option<(i64, i64)> =
                sqlx::query_as("SELECT stock, version FROM products WHERE id = ?")
                    .bind(product.id)
                    .fetch_optional(backends.mysql()?)
                    .await?;
            let (remaining, moves) = row.unwrap_or_default();
            Ok(Mark { remaining, moves })
        })
    }

    /// The row written with the new epoch and wave 1's stock, the
    /// product's old orders, buyer counts and lock rows gone, in one
    /// MySQL transaction.
    fn lay_out<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let first_wave = through(product.initial, product.settings.waves, 1)[0][1];
            let mysql = backends.mysql()?;
            reset(mysql, product, Some(first_wave), &stale.lock_rows).await
        })
    }
}

/// The reset's part in MySQL for a product laid out in another store:
/// what it left here goes, so nothing of it is counted (nothing to do
/// without a MySQL).
pub async fn leave(
    backends: &Backends,
    product: &Product,
    stale: &Footprint,
) -> Result<(), BackendError> {
    match &backends.mysql {
        Some(mysql) => reset(mysql, product, None, &stale.lock_rows).await,
        None => Ok(()),
    }
}

/// The product's stock; with a fencing token, records it as the newest
/// that has touched the row, in the same statement that reads (the stock
/// comes back as `LAST_INSERT_ID`).
async fn read(ctx: &BuyCtx<'_>, fence: Option<u64>) -> Result<i64, BackendError> {
    let product = ctx.product;
    let mysql = ctx.backends.mysql()?;
    match fence {
        None => Ok(
            sqlx::query_scalar("SELECT stock FROM products WHERE id = ? AND epoch = ?")
                .bind(product.id)
                .bind(product.epoch)
                .fetch_optional(mysql)
                .await?
                .unwrap_or(0),
        ),
        Some(token) => {
            let done = sqlx::query(
                "UPDATE products SET fence = GREATEST(fence, ?), stock = LAST_INSERT_ID(stock) \
                 WHERE id = ? AND epoch = ?",
            )
            .bind(token as i64)
            .bind(product.id)
            .bind(product.epoch)
            .execute(mysql)
            .await?;
            // sqlx asks for found rows: 1 even when nothing changed.
            Ok(if done.rows_affected() == 0 {
                0
            } else {
                done.last_insert_id() as i64
            })
        }
    }
}

/// Writes `new_stock`, counts the unit against the buyer's limit and
/// inserts the order in one transaction; refused when the product was
/// reset, a newer fencing token touched the row, or the buyer is at the
/// limit. Run again when InnoDB rolled it back (writers a broken lock lets
/// in together can deadlock on the row and the buyer counts).
async fn write(
    ctx: &BuyCtx<'_>,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    again_if_rolled_back(|| try_write(ctx, new_stock, fence)).await
}

async fn try_write(
    ctx: &BuyCtx<'_>,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mysql = ctx.backends.mysql()?;
    let mut tx = mysql.begin().await?;
    // Found rows, not changed rows: a lost update that writes the value
    // already there still matches.
    let updated = sqlx::query(
        "UPDATE products SET stock = ?, version = version + 1 \
         WHERE id = ? AND epoch = ? AND (? IS NULL OR fence <= ?)",
    )
    .bind(new_stock)
    .bind(product.id)
    .bind(product.epoch)
    .bind(fence.map(|t| t as i64))
    .bind(fence.map(|t| t as i64))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        let same_epoch: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM products WHERE id = ? AND epoch = ?")
                .bind(product.id)
                .bind(product.epoch)
                .fetch_optional(&mut *tx)
                .await?;
        return Ok(if same_epoch.is_some() {
            Written::Fenced
        } else {
            Written::Reset
        });
    }
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Written::LimitReached);
    }
    bind_order(ctx).execute(&mut *tx).await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(new_stock),
    })
}

/// A reset's part in MySQL, in one transaction: the product's orders,
/// buyer counts and lock rows go; its row is written with the new `epoch`
/// and wave 1's `stock` when the product is stored here (`stock` given),
/// and deleted otherwise, so a product that leaves MySQL leaves nothing
/// behind to be counted.
async fn reset(
    mysql: &MySqlPool,
    product: &Product,
    stock: Option<i64>,
    lock_rows: &[String],
) -> Result<(), BackendError> {
    let (id, epoch) = (product.id, product.epoch);
    let mut tx = mysql.begin().await?;
    for delete in [
        "DELETE FROM orders WHERE product_id = ?",
        "DELETE FROM buyer_counts WHERE product_id = ?",
    ] {
        sqlx::query(delete).bind(id).execute(&mut *tx).await?;
    }
    for name in lock_rows {
        sqlx::query("DELETE FROM locks WHERE name = ?")
            .bind(name)
            .execute(&mut *tx)
            .await?;
    }
    match stock {
        Some(stock) => {
            sqlx::query(
                "INSERT INTO products (id, epoch, stock, version, fence, waves_released) \
                 VALUES (?, ?, ?, 0, 0, 1) ON DUPLICATE KEY UPDATE epoch = VALUES(epoch), \
                 stock = VALUES(stock), version = 0, fence = 0, waves_released = 1",
            )
            .bind(id)
            .bind(epoch)
            .bind(stock)
            .execute(&mut *tx)
            .await?;
        }
        None => {
            sqlx::query("DELETE FROM products WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
