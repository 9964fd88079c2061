//! The PostgreSQL store: `products.stock`, written in one transaction with
//! the order's INSERT.

use super::Written;
use crate::error::{AtCommit, BackendError};
use crate::limit;
use crate::orders::INSERT_SQL;
use crate::sale::BuyCtx;

/// The product's stock; with a fencing token, records it as the newest
/// that has touched the row (in the same statement that reads).
pub async fn read(ctx: &BuyCtx<'_>, fence: Option<u64>) -> Result<i64, BackendError> {
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
pub async fn write(
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
