//! The PostgreSQL store: `products.stock`, written in one transaction with
//! the order's INSERT into PostgreSQL's `orders` — where every order but a
//! MySQL-stored product's ends up.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::mysql_store;
use super::pg_book::PgBook;
use super::pg_rows::PgRows;
use crate::backends::conn::RedisConn;
use crate::backends::failure::{AtCommit, BackendError};
use crate::backends::{Backends, Footprint};
use crate::model::order::{INSERT_SQL, Order};
use crate::model::product::shares::through;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{Book, BuyCtx, Mark, Rows, Store, StoreFuture, Written};
use crate::stock::limit;

/// A product's stock in PostgreSQL's `products` row.
pub struct PgStore;

impl Store for PgStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Postgres
    }

    fn orders_in(&self) -> StoreKind {
        StoreKind::Postgres
    }

    fn rows(&self) -> Option<&'static dyn Rows> {
        Some(&PgRows)
    }

    fn lock_table(&self) -> &'static dyn Rows {
        &PgRows
    }

    fn book(&self) -> &'static dyn Book {
        &PgBook
    }

    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        orders: &'a [Order],
        once: bool,
    ) -> StoreFuture<'a, usize> {
        Box::pin(super::pg_book::restock(ctx, orders, once))
    }

    fn set_stock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(super::pg_book::set_stock(ctx, expected, stock))
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
                "SELECT bought::bigint FROM buyer_counts \
                 WHERE product_id = $1 AND epoch = $2 AND user_id = $3",
            )
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .bind(&ctx.order.user_id)
            .fetch_optional(&ctx.backends.pg)
            .await?;
            Ok(held.unwrap_or(0))
        })
    }

    fn find_order<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        _product: &'a Product,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Order>> {
        Box::pin(find_order(&backends.pg, order_id))
    }

    fn release<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        product: &'a Product,
        due: u32,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let through = &through(product.initial, product.settings.waves, 1)[0];
            sqlx::query(
                "UPDATE products SET stock = stock + ($4::bigint[])[$3 + 1] - ($4::bigint[])[waves_released + 1], \
                 waves_released = $3 WHERE id = $1 AND epoch = $2 AND waves_released < $3",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(due as i32)
            .bind(through)
            .execute(&backends.pg)
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
                sqlx::query_scalar("SELECT waves_released FROM products WHERE id = $1")
                    .bind(product.id)
                    .fetch_optional(&backends.pg)
                    .await?;
            Ok(vec![held.unwrap_or(1).max(1) as u32])
        })
    }

    fn orders<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)> {
        Box::pin(count_orders(&backends.pg, product, in_stream))
    }

    fn mark<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Mark> {
        Box::pin(async move {
            let row: Option<(i64, i64)> =
                sqlx::query_as("SELECT stock, version FROM products WHERE id = $1")
                    .bind(product.id)
                    .fetch_optional(&backends.pg)
                    .await?;
            let (remaining, moves) = row.unwrap_or_default();
            Ok(Mark { remaining, moves })
        })
    }

    /// The row's stock is written by the reset's own upsert; here only
    /// what the product left in MySQL goes.
    fn lay_out<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        Box::pin(mysql_store::leave(backends, product, stale))
    }
}

/// The order `order_id` in PostgreSQL's `orders`.
pub async fn find_order(pg: &PgPool, order_id: Uuid) -> Result<Option<Order>, BackendError> {
    let stored: Option<(i64, i64, String, String, String)> = sqlx::query_as(
        "SELECT product_id, epoch, user_id, strategy, served_by FROM orders WHERE order_id = $1",
    )
    .bind(order_id)
    .fetch_optional(pg)
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
}

/// The ledger's count of a product's orders whose sales end in
/// PostgreSQL: (this reset's orders in the table, of `in_stream` those
/// the table does not have yet). One query, so an order that moves from
/// the stream into the table between the stream's read and this one is
/// counted once.
pub async fn count_orders(
    pg: &PgPool,
    product: &Product,
    in_stream: &[Uuid],
) -> Result<(i64, i64), BackendError> {
    Ok(sqlx::query_as(
        "SELECT (SELECT count(*) FROM orders WHERE product_id = $1 AND epoch = $2), \
        (SELECT count(*) FROM unnest($3::uuid[]) AS s(id) \
         WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_id = s.id))",
    )
    .bind(product.id)
    .bind(product.epoch)
    .bind(in_stream)
    .fetch_one(pg)
    .await?)
}

/// The product's stock; with a fencing token, records it as the newest
/// that has touched the row (in the same statement that reads).
async fn read(ctx: &BuyCtx<'_>, fence: Option<u64>) -> Result<i64, BackendError> {
    let product = ctx.product;
    let stock: Option<i64> = match fence {
        None => {
            sqlx::query_scalar("SELECT stock FROM products WHERE id = $1 AND epoch = $2")
                .bind(product.id)
                .bind(product.epoch)
                .fetch_optional(&ctx.backends.pg)
                .await?
        }
        Some(token) => {
            sqlx::query_scalar(
                "UPDATE products SET fence = GREATEST(fence, $3) \
                 WHERE id = $1 AND epoch = $2 RETURNING stock",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(token as i64)
            .fetch_optional(&ctx.backends.pg)
            .await?
        }
    };
    Ok(stock.unwrap_or(0))
}

/// Writes `new_stock`, counts the unit against the buyer's limit and
/// inserts the order in one transaction; refused when the product was
/// reset, a newer fencing token touched the row, or the buyer is at the
/// limit.
async fn write(
    ctx: &BuyCtx<'_>,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    let product = ctx.product;
    let mut tx = ctx.backends.pg.begin().await?;
    let updated = sqlx::query(
        "UPDATE products SET stock = $3 \
         WHERE id = $1 AND epoch = $2 AND ($4::bigint IS NULL OR fence <= $4)",
    )
    .bind(product.id)
    .bind(product.epoch)
    .bind(new_stock)
    .bind(fence.map(|t| t as i64))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if updated == 0 {
        let same_epoch: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM products WHERE id = $1 AND epoch = $2)",
        )
        .bind(product.id)
        .bind(product.epoch)
        .fetch_one(&mut *tx)
        .await?;
        return Ok(if same_epoch {
            Written::Fenced
        } else {
            Written::Reset
        });
    }
    if !limit::claim_pg(&mut tx, ctx).await? {
        // Dropping the transaction rolls the stock write back.
        return Ok(Written::LimitReached);
    }
    ctx.order
        .bind_insert(sqlx::query(INSERT_SQL))
        .execute(&mut *tx)
        .await?;
    tx.commit().await.at_commit()?;
    Ok(Written::Sold {
        left: Some(new_stock),
    })
}
