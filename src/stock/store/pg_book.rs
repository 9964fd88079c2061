//! PostgreSQL's `orders` as a [`Book`] of order states, and the give-back
//! of a unit to PostgreSQL's row ([`restock`]).

use sqlx::PgConnection;
use uuid::Uuid;

use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::order::Order;
use crate::model::order::state::{OrderRow, Tally, TallyRow, Tracked, TrackedRow, column};
use crate::model::product::Product;
use crate::model::seam::{Book, BuyCtx, Due, Mark, StoreFuture};

/// The order states in PostgreSQL.
pub struct PgBook;

impl Book for PgBook {
    fn find<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Tracked>> {
        Box::pin(async move {
            let row: Option<TrackedRow> = sqlx::query_as(
                "SELECT order_id, product_id, epoch, user_id, strategy, served_by, state, \
                     paid_at_ms FROM orders WHERE order_id = $1",
            )
            .bind(order_id)
            .fetch_optional(&backends.pg)
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
                "UPDATE orders SET state = $2, paid_at_ms = $3 WHERE order_id = $1 \
                 AND state IS NULL AND ($4::uuid IS NULL OR order_id >= $4)",
            )
            .bind(order_id)
            .bind(column::PAID)
            .bind(now_ms)
            .bind(payable_from)
            .execute(&backends.pg)
            .await?;
            Ok(paid.rows_affected() == 1)
        })
    }

    fn expire<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
    ) -> StoreFuture<'a, Vec<Uuid>> {
        Box::pin(async move {
            if order_ids.is_empty() {
                return Ok(Vec::new());
            }
            Ok(sqlx::query_scalar(
                "UPDATE orders SET state = $2 WHERE order_id = ANY($1) AND state IS NULL \
                 RETURNING order_id",
            )
            .bind(order_ids)
            .bind(column::EXPIRED)
            .fetch_all(&backends.pg)
            .await?)
        })
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
            sqlx::query(
                "UPDATE orders SET state = $2 WHERE order_id = ANY($1) AND ($4 OR state = $3)",
            )
            .bind(order_ids)
            .bind(column::RETURNED)
            .bind(column::EXPIRED)
            .bind(blindly)
            .execute(&backends.pg)
            .await?;
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
            let rows: Vec<OrderRow> = sqlx::query_as(
                "SELECT order_id, product_id, epoch, user_id, strategy, served_by FROM orders \
                 WHERE product_id = $1 AND epoch = $2 AND state IS NOT DISTINCT FROM $3 \
                 AND ($4::uuid IS NULL OR order_id < $4) ORDER BY order_id LIMIT $5",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(state)
            .bind(cutoff)
            .bind(limit)
            .fetch_all(&backends.pg)
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
        Box::pin(async move {
            let rows: Vec<OrderRow> = sqlx::query_as(
                "UPDATE orders SET state = $5 WHERE order_id IN ( \
                   SELECT order_id FROM orders WHERE product_id = $1 AND epoch = $2 \
                   AND state IS NULL AND order_id < $3 ORDER BY order_id LIMIT $4 \
                   FOR UPDATE SKIP LOCKED) AND state IS NULL \
                 RETURNING order_id, product_id, epoch, user_id, strategy, served_by",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(cutoff)
            .bind(limit)
            .bind(column::EXPIRED)
            .fetch_all(&backends.pg)
            .await?;
            Ok(rows.into_iter().map(Order::from).collect())
        })
    }

    fn tally<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Tally> {
        Box::pin(async move {
            let counts: TallyRow = sqlx::query_as(
                "SELECT count(*) FILTER (WHERE state IS NULL), \
                 count(*) FILTER (WHERE paid_at_ms IS NOT NULL), \
                 count(*) FILTER (WHERE state IN ($3, $4) AND paid_at_ms IS NULL), \
                 count(*) FILTER (WHERE state = $4), \
                 count(*) FILTER (WHERE state = $3), \
                 count(*) FILTER (WHERE state = $4 AND paid_at_ms IS NOT NULL) \
                 FROM orders WHERE product_id = $1 AND epoch = $2",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(column::EXPIRED)
            .bind(column::RETURNED)
            .fetch_one(&backends.pg)
            .await?;
            Ok(Tally::from(counts))
        })
    }
}

/// Puts the units of `orders` back in PostgreSQL's row, in one
/// transaction with their buyers' counts and, `once`, with each order's
/// `expired → returned` (only the orders this call marks go back: no
/// unit goes back twice). One update of the product's row however many
/// go back: a reaper behind a busy sale costs the hot row one write per
/// pass. The version moves too, so an optimistic writer that read before
/// it retries. How many went back.
pub async fn restock(
    ctx: &BuyCtx<'_>,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    let product = ctx.product;
    let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
    let mut tx = ctx.backends.pg.begin().await?;
    let buyers: Vec<String> = match once {
        true => {
            sqlx::query_scalar(
                "UPDATE orders SET state = $2 WHERE order_id = ANY($1) AND state = $3 \
                 RETURNING user_id",
            )
            .bind(&ids)
            .bind(column::RETURNED)
            .bind(column::EXPIRED)
            .fetch_all(&mut *tx)
            .await?
        }
        false => orders.iter().map(|o| o.user_id.clone()).collect(),
    };
    if buyers.is_empty() {
        return Ok(0);
    }
    let back = sqlx::query(
        "UPDATE products SET stock = stock + $3, version = version + 1 \
         WHERE id = $1 AND epoch = $2",
    )
    .bind(product.id)
    .bind(product.epoch)
    .bind(buyers.len() as i64)
    .execute(&mut *tx)
    .await?;
    if back.rows_affected() == 0 {
        return Ok(0);
    }
    uncount(&mut tx, product, &buyers).await?;
    tx.commit().await?;
    Ok(buyers.len())
}

/// Takes one unit off each of `buyers`' counts (a product with a limit; a
/// buyer named twice, two).
async fn uncount(
    tx: &mut PgConnection,
    product: &Product,
    buyers: &[String],
) -> Result<(), BackendError> {
    if product.settings.per_user_limit == 0 {
        return Ok(());
    }
    sqlx::query(
        "UPDATE buyer_counts AS c SET bought = GREATEST(c.bought - back.n, 0) \
         FROM (SELECT user_id, count(*) AS n FROM unnest($3::text[]) AS user_id GROUP BY user_id) AS back \
         WHERE c.product_id = $1 AND c.epoch = $2 AND c.user_id = back.user_id",
    )
    .bind(product.id)
    .bind(product.epoch)
    .bind(buyers)
    .execute(tx)
    .await?;
    Ok(())
}

/// Sets PostgreSQL's row to `stock` if nothing wrote it since `expected`
/// was read, in this reset (see [`crate::model::seam::Store::set_stock`]).
pub async fn set_stock(ctx: &BuyCtx<'_>, expected: Mark, stock: i64) -> Result<bool, BackendError> {
    let set =
        sqlx::query("UPDATE products SET stock = $3 WHERE id = $1 AND epoch = $2 AND version = $4")
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .bind(stock)
            .bind(expected.moves)
            .execute(&ctx.backends.pg)
            .await?;
    Ok(set.rows_affected() == 1)
}
