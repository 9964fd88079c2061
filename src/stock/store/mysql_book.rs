//! MySQL's `orders` as a [`Book`] of order states (products stored in
//! MySQL keep their orders there), and the give-back of a unit to MySQL's
//! row ([`restock`]). The statements are PostgreSQL's ([`super::pg_book`])
//! in MySQL's dialect; the delay queue's claim is a locking read with
//! `SKIP LOCKED` and the updates in one transaction, as MySQL cannot
//! update the table its own subquery reads.

use sqlx::{MySql, MySqlConnection, QueryBuilder};
use uuid::Uuid;

use super::innodb::again_if_rolled_back;
use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::order::state::{OrderRow, Tally, TallyRow, Tracked, TrackedRow, column};
use crate::model::order::{Order, order_columns};
use crate::model::product::Product;
use crate::model::seam::{Book, BuyCtx, Due, Mark, StoreFuture};

/// The order states in MySQL.
pub struct MysqlBook;

impl Book for MysqlBook {
    fn find<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Tracked>> {
        Box::pin(async move {
            let Some(mysql) = backends.mysql.as_ref() else {
                return Ok(None);
            };
            let row: Option<TrackedRow> = sqlx::query_as(concat!(
                "SELECT ",
                order_columns!(),
                ", state, paid_at_ms FROM orders WHERE order_id = ?"
            ))
            .bind(order_id)
            .fetch_optional(mysql)
            .await?;
            Ok(row.map(Tracked::from))
        })
    }

    fn pay<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
        payable_from: Option<Uuid>,
        now_ms: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let paid = sqlx::query(
                "UPDATE orders SET state = ?, paid_at_ms = ? WHERE order_id = ? \
                 AND state IS NULL AND (? IS NULL OR order_id >= ?)",
            )
            .bind(column::PAID)
            .bind(now_ms)
            .bind(order_id)
            .bind(payable_from)
            .bind(payable_from)
            .execute(backends.mysql()?)
            .await?;
            Ok(paid.rows_affected() == 1)
        })
    }

    fn expire<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
    ) -> StoreFuture<'a, Vec<Uuid>> {
        Box::pin(again_if_rolled_back(move || {
            expire_once(backends, order_ids)
        }))
    }

    fn returned<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if order_ids.is_empty() {
                return Ok(());
            }
            let mut update = QueryBuilder::<MySql>::new("UPDATE orders SET state = ");
            update.push_bind(column::RETURNED);
            update.push(" WHERE (");
            update.push_bind(blindly);
            update.push(" OR state = ");
            update.push_bind(column::EXPIRED);
            update.push(") AND order_id IN ");
            in_list(&mut update, order_ids);
            update.build().execute(backends.mysql()?).await?;
            Ok(())
        })
    }

    fn due<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        due: Due,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(async move {
            let (state, cutoff) = match due {
                Due::Overdue(cutoff) => (None, Some(cutoff)),
                Due::Owed => (Some(column::EXPIRED), None),
            };
            let rows: Vec<OrderRow> = sqlx::query_as(concat!(
                "SELECT ",
                order_columns!(),
                " FROM orders WHERE product_id = ? AND epoch = ? \
                 AND state <=> ? AND (? IS NULL OR order_id < ?) ORDER BY order_id LIMIT ?"
            ))
            .bind(product.id)
            .bind(product.epoch)
            .bind(state)
            .bind(cutoff)
            .bind(cutoff)
            .bind(limit)
            .fetch_all(backends.mysql()?)
            .await?;
            Ok(rows.into_iter().map(Order::from).collect())
        })
    }

    fn claim<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(again_if_rolled_back(move || {
            claim_once(backends, product, cutoff, limit)
        }))
    }

    fn tally<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Tally> {
        Box::pin(async move {
            let counts: TallyRow = sqlx::query_as(
                "SELECT CAST(COALESCE(SUM(state IS NULL), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(paid_at_ms IS NOT NULL), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(state IN (?, ?) AND paid_at_ms IS NULL), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(state = ?), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(state = ?), 0) AS SIGNED), \
                 CAST(COALESCE(SUM(state = ? AND paid_at_ms IS NOT NULL), 0) AS SIGNED) \
                 FROM orders WHERE product_id = ? AND epoch = ?",
            )
            .bind(column::EXPIRED)
            .bind(column::RETURNED)
            .bind(column::RETURNED)
            .bind(column::EXPIRED)
            .bind(column::RETURNED)
            .bind(product.id)
            .bind(product.epoch)
            .fetch_one(backends.mysql()?)
            .await?;
            Ok(Tally::from(counts))
        })
    }
}

/// One try of the delay queue's claim: lock the overdue holds other
/// reapers have not locked, mark them expired, commit.
async fn claim_once(
    backends: &Backends,
    product: &Product,
    cutoff: Uuid,
    limit: i64,
) -> Result<Vec<Order>, BackendError> {
    let mut tx = backends.mysql()?.begin().await?;
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

/// held → expired for each of `order_ids` still held: the rows locked
/// and read, then moved, in one transaction (MariaDB's `UPDATE` returns
/// no rows).
async fn expire_once(backends: &Backends, order_ids: &[Uuid]) -> Result<Vec<Uuid>, BackendError> {
    if order_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = backends.mysql()?.begin().await?;
    let mut held = QueryBuilder::<MySql>::new(
        "SELECT order_id FROM orders WHERE state IS NULL AND order_id IN ",
    );
    in_list(&mut held, order_ids);
    held.push(" FOR UPDATE");
    let won: Vec<Uuid> = held.build_query_scalar().fetch_all(&mut *tx).await?;
    if !won.is_empty() {
        let mut update = QueryBuilder::<MySql>::new("UPDATE orders SET state = ");
        update.push_bind(column::EXPIRED);
        update.push(" WHERE order_id IN ");
        in_list(&mut update, &won);
        update.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(won)
}

/// ` (?, ?, …)` binding `order_ids`.
fn in_list(query: &mut QueryBuilder<MySql>, order_ids: &[Uuid]) {
    query.push("(");
    let mut ids = query.separated(", ");
    for id in order_ids {
        ids.push_bind(*id);
    }
    query.push(")");
}

/// Puts the units of `orders` back in MySQL's row: as
/// [`super::pg_book::restock`], run again when InnoDB rolled it back.
pub async fn restock(
    ctx: &BuyCtx<'_>,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    again_if_rolled_back(|| restock_once(ctx, orders, once)).await
}

async fn restock_once(
    ctx: &BuyCtx<'_>,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    let product = ctx.product;
    let mut tx = ctx.backends.mysql()?.begin().await?;
    let buyers: Vec<(Uuid, String)> = match once {
        true => {
            let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
            let mut owed =
                QueryBuilder::<MySql>::new("SELECT order_id, user_id FROM orders WHERE state = ");
            owed.push_bind(column::EXPIRED);
            owed.push(" AND order_id IN ");
            in_list(&mut owed, &ids);
            owed.push(" FOR UPDATE");
            owed.build_query_as().fetch_all(&mut *tx).await?
        }
        false => orders
            .iter()
            .map(|o| (o.order_id, o.user_id.clone()))
            .collect(),
    };
    if buyers.is_empty() {
        return Ok(0);
    }
    if once {
        let ids: Vec<Uuid> = buyers.iter().map(|(id, _)| *id).collect();
        let mut mark = QueryBuilder::<MySql>::new("UPDATE orders SET state = ");
        mark.push_bind(column::RETURNED);
        mark.push(" WHERE order_id IN ");
        in_list(&mut mark, &ids);
        mark.build().execute(&mut *tx).await?;
    }
    let back = sqlx::query(
        "UPDATE products SET stock = stock + ?, version = version + 1 WHERE id = ? AND epoch = ?",
    )
    .bind(buyers.len() as i64)
    .bind(product.id)
    .bind(product.epoch)
    .execute(&mut *tx)
    .await?;
    if back.rows_affected() == 0 {
        return Ok(0);
    }
    if product.settings.per_user_limit > 0 {
        for (_, buyer) in &buyers {
            uncount(&mut tx, product, buyer).await?;
        }
    }
    tx.commit().await?;
    Ok(buyers.len())
}

/// Takes one unit off `buyer`'s count.
async fn uncount(
    tx: &mut MySqlConnection,
    product: &Product,
    buyer: &str,
) -> Result<(), BackendError> {
    sqlx::query(
        "UPDATE buyer_counts SET bought = bought - 1 \
         WHERE product_id = ? AND epoch = ? AND user_id = ? AND bought > 0",
    )
    .bind(product.id)
    .bind(product.epoch)
    .bind(buyer)
    .execute(tx)
    .await?;
    Ok(())
}

/// Sets MySQL's row to `stock` if nothing wrote it since `expected` was
/// read, in this reset (see [`crate::model::seam::Store::set_stock`]).
pub async fn set_stock(ctx: &BuyCtx<'_>, expected: Mark, stock: i64) -> Result<bool, BackendError> {
    let set = sqlx::query(
        "UPDATE products SET stock = ?, version = version + 1 \
             WHERE id = ? AND epoch = ? AND version = ?",
    )
    .bind(stock)
    .bind(ctx.product.id)
    .bind(ctx.product.epoch)
    .bind(expected.moves)
    .execute(ctx.backends.mysql()?)
    .await?;
    Ok(set.rows_affected() == 1)
}
