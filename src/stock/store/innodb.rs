//! The steps MySQL takes in several statements where PostgreSQL takes one
//! ([`super::mysql`]'s hooks): MariaDB's `UPDATE` returns no rows and
//! MySQL cannot update the table its own subquery reads, so the rows are
//! locked and read first (`FOR UPDATE`, `SKIP LOCKED`), then moved, in one
//! transaction; and a reset's part in MySQL.

use sqlx::{MySql, MySqlConnection, MySqlPool, QueryBuilder};
use uuid::Uuid;

use crate::backends::failure::BackendError;
use crate::model::order::state::{OrderRow, column};
use crate::model::order::{Order, order_columns};
use crate::model::product::Product;

/// One try of the delay queue's claim: lock the overdue holds other
/// reapers have not locked, mark them expired, commit.
pub async fn claim_due(
    mysql: &MySqlPool,
    product: &Product,
    cutoff: Uuid,
    limit: i64,
) -> Result<Vec<Order>, BackendError> {
    let mut tx = mysql.begin().await?;
    let rows: Vec<OrderRow> = sqlx::query_as(concat!(
        "SELECT ",
        order_columns!(),
        " FROM orders WHERE product_id = ? AND epoch = ? AND state IS NULL \
         AND order_id < ? ORDER BY order_id LIMIT ? FOR UPDATE SKIP LOCKED"
    ))
    .bind(product.id)
    .bind(product.epoch)
    .bind(cutoff)
    .bind(limit)
    .fetch_all(&mut *tx)
    .await?;
    for row in &rows {
        sqlx::query("UPDATE orders SET state = ? WHERE order_id = ?")
            .bind(column::EXPIRED)
            .bind(row.0)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(rows.into_iter().map(Order::from).collect())
}

/// One try of held → expired for each of `order_ids` still held.
pub async fn expire(mysql: &MySqlPool, order_ids: &[Uuid]) -> Result<Vec<Uuid>, BackendError> {
    let mut tx = mysql.begin().await?;
    let mut held = QueryBuilder::<MySql>::new(
        "SELECT order_id FROM orders WHERE state IS NULL AND order_id IN ",
    );
    in_list(&mut held, order_ids);
    held.push(" FOR UPDATE");
    let won: Vec<Uuid> = held.build_query_scalar().fetch_all(&mut *tx).await?;
    if !won.is_empty() {
        set_state(&mut tx, column::EXPIRED, &won).await?;
    }
    tx.commit().await?;
    Ok(won)
}

/// In the caller's transaction: those of `orders` still `expired`, locked
/// and marked `returned`; their buyers.
pub async fn mark_returned(
    tx: &mut MySqlConnection,
    orders: &[Order],
) -> Result<Vec<String>, BackendError> {
    let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
    let mut owed =
        QueryBuilder::<MySql>::new("SELECT order_id, user_id FROM orders WHERE state = ");
    owed.push_bind(column::EXPIRED);
    owed.push(" AND order_id IN ");
    in_list(&mut owed, &ids);
    owed.push(" FOR UPDATE");
    let owed: Vec<(Uuid, String)> = owed.build_query_as().fetch_all(&mut *tx).await?;
    if !owed.is_empty() {
        let ids: Vec<Uuid> = owed.iter().map(|(id, _)| *id).collect();
        set_state(tx, column::RETURNED, &ids).await?;
    }
    Ok(owed.into_iter().map(|(_, buyer)| buyer).collect())
}

/// Sets `state` on `order_ids`.
async fn set_state(
    tx: &mut MySqlConnection,
    state: &str,
    order_ids: &[Uuid],
) -> Result<(), BackendError> {
    let mut update = QueryBuilder::<MySql>::new("UPDATE orders SET state = ");
    update.push_bind(state);
    update.push(" WHERE order_id IN ");
    in_list(&mut update, order_ids);
    update.build().execute(tx).await?;
    Ok(())
}

/// ` (?, ?, …)` binding `order_ids`: MySQL has no arrays to bind a list as
/// one parameter.
pub fn in_list(query: &mut QueryBuilder<MySql>, order_ids: &[Uuid]) {
    query.push("(");
    let mut ids = query.separated(", ");
    for id in order_ids {
        ids.push_bind(*id);
    }
    query.push(")");
}

/// A reset's part in MySQL, in one transaction: the product's orders,
/// buyer counts and lock rows go; its row is written with the new `epoch`
/// and wave 1's `stock` when the product is stored here (`stock` given),
/// and deleted otherwise, so a product that leaves MySQL leaves nothing
/// behind to be counted.
pub async fn reset(
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
