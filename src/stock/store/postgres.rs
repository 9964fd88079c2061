//! PostgreSQL's dialect of the SQL stores (see [`Dialect`]): `RETURNING`
//! hands values back in the statement's own round trip, a CTE lets one
//! statement decrement and insert the order, arrays bind a list as one
//! parameter, and a trigger moves `version` on every update (migration
//! 0007) — where every order but a MySQL-stored product's ends up.

use sqlx::postgres::PgConnection;
use sqlx::{PgPool, Postgres, Row};
use uuid::Uuid;

use super::dialect::{Dialect, Query, Statements, Stmt, plumbing, with_order};
use super::mysql;
use crate::backends::failure::{AtCommit, BackendError};
use crate::backends::{Backends, Footprint};
use crate::model::order::state::{OrderRow, column};
use crate::model::order::{INSERT_SQL, Order, insert_if_sold, order_columns};
use crate::model::product::shares::through;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{BuyCtx, Outcome, StoreFuture};
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

/// PostgreSQL.
pub struct Pg;

impl Dialect for Pg {
    type Db = Postgres;
    const KIND: StoreKind = StoreKind::Postgres;
    const SQL: Statements = Statements {
        read: "SELECT stock FROM products WHERE id = $1 AND epoch = $2",
        fence: "UPDATE products SET fence = GREATEST(fence, $1) \
            WHERE id = $2 AND epoch = $3 RETURNING stock",
        write: "UPDATE products SET stock = $1 \
            WHERE id = $2 AND epoch = $3 AND ($4::bigint IS NULL OR fence <= $5)",
        bought: "SELECT bought::bigint FROM buyer_counts \
            WHERE product_id = $1 AND epoch = $2 AND user_id = $3",
        find_order: concat!(
            "SELECT ",
            order_columns!(),
            " FROM orders WHERE order_id = $1"
        ),
        waves_held: "SELECT waves_released FROM products WHERE id = $1",
        mark: "SELECT stock, version FROM products WHERE id = $1",
        set_stock: "UPDATE products SET stock = $1 WHERE id = $2 AND epoch = $3 AND version = $4",
        put_back: "UPDATE products SET stock = stock + $1, version = version + 1 \
            WHERE id = $2 AND epoch = $3",
        add: "INSERT INTO additions (product_id, epoch, addition_id, units) \
            VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
        added: "SELECT COALESCE(SUM(units), 0)::BIGINT FROM additions \
            WHERE product_id = $1 AND epoch = $2",
        for_update: "SELECT stock FROM products WHERE id = $1 AND epoch = $2 FOR UPDATE",
        take_one: "UPDATE products SET stock = stock - 1 WHERE id = $1",
        versioned: "SELECT stock, version FROM products WHERE id = $1 AND epoch = $2",
        repeatable_read: "BEGIN ISOLATION LEVEL REPEATABLE READ",
        set_left: "UPDATE products SET stock = $1 WHERE id = $2",
        // The unique name makes the INSERT the acquisition. `DO NOTHING`
        // checks the index without locking a held row, so waiters do not
        // queue on the holder's row lock.
        lock_insert: "INSERT INTO locks (name, owner, lease_ms, acquired_at) \
            VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name) DO NOTHING",
        // Only a row past its lease matches: a live holder's is never touched.
        lock_take_over: "UPDATE locks SET owner = $1, lease_ms = $2, \
            acquired_at = clock_timestamp() WHERE name = $3 \
            AND acquired_at + lease_ms * interval '1 millisecond' < clock_timestamp()",
        lock_drop: "DELETE FROM locks WHERE name = $1 AND owner = $2",
        insert_order: INSERT_SQL,
        find: concat!(
            "SELECT ",
            order_columns!(),
            ", state, paid_at_ms FROM orders WHERE order_id = $1"
        ),
        pay: "UPDATE orders SET state = $1, paid_at_ms = $2 WHERE order_id = $3 \
            AND state IS NULL AND ($4::uuid IS NULL OR order_id >= $5)",
        due: concat!(
            "SELECT ",
            order_columns!(),
            " FROM orders WHERE product_id = $1 AND epoch = $2 \
            AND state IS NOT DISTINCT FROM $3 AND ($4::uuid IS NULL OR order_id < $5) \
            ORDER BY order_id LIMIT $6"
        ),
        tally: "SELECT count(*) FILTER (WHERE state IS NULL), \
            count(*) FILTER (WHERE paid_at_ms IS NOT NULL), \
            count(*) FILTER (WHERE state IN ($1, $2) AND paid_at_ms IS NULL), \
            count(*) FILTER (WHERE state = $3), \
            count(*) FILTER (WHERE state = $4), \
            count(*) FILTER (WHERE state = $5 AND paid_at_ms IS NOT NULL) \
            FROM orders WHERE product_id = $6 AND epoch = $7",
    };

    fn pool(backends: &Backends) -> Result<&PgPool, BackendError> {
        Ok(&backends.pg)
    }

    fn configured(backends: &Backends) -> Option<&PgPool> {
        Some(&backends.pg)
    }

    plumbing!();

    fn returning<'a>(
        query: Query<'a, Self>,
        on: &'a mut PgConnection,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move { Ok(query.fetch_optional(on).await?.map(|row| row.get(0))) })
    }

    fn rolled_back(_error: &BackendError) -> bool {
        false
    }

    fn serialization_failure(error: &BackendError) -> bool {
        // Of any statement: the stock's UPDATE, or the buyer's count.
        matches!(error, BackendError::Sql(sqlx::Error::Database(db))
            if db.code().as_deref() == Some("40001"))
    }

    fn claim<'a>(on: &'a mut PgConnection, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, bool> {
        Box::pin(limit::claim_pg(on, ctx))
    }

    fn sell<'a>(on: &'a mut PgConnection, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<i64>> {
        Box::pin(with_order::<Self>(SELL_SQL, ctx.order).returning(on))
    }

    /// One statement without a limit; with one, one function call
    /// (`seckill_sell_one`, migration 0004: the hot row's lock held for no
    /// network round trip).
    fn sell_now<'a>(ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome> {
        Box::pin(async move {
            let settings = &ctx.product.settings;
            if settings.per_user_limit == 0 {
                let pg = &mut *ctx.backends.pg.acquire().await.at_commit()?;
                let left = Self::sell(pg, ctx).await.at_commit()?;
                return Ok(left.map_or(Outcome::SoldOut, |left| Outcome::Sold { left: Some(left) }));
            }
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
            Outcome::from_reply(&[verdict.into(), left.unwrap_or_default()])
        })
    }

    /// The CAS with the order; with a per-user limit, the buyer's unit is
    /// claimed in the same transaction (and rolled back with a lost CAS).
    fn compare_and_set<'a>(ctx: &'a BuyCtx<'a>, version: i64) -> StoreFuture<'a, Option<Outcome>> {
        Box::pin(async move {
            let cas = with_order::<Self>(CAS_SQL, ctx.order).bind(version);
            let sold = |left| Outcome::Sold { left: Some(left) };
            if ctx.product.settings.per_user_limit == 0 {
                let pg = &mut *ctx.backends.pg.acquire().await.at_commit()?;
                return Ok(cas.returning(pg).await.at_commit()?.map(sold));
            }
            let mut tx = ctx.backends.pg.begin().await?;
            if !limit::claim_pg(&mut tx, ctx).await? {
                return Ok(Some(Outcome::LimitReached));
            }
            let Some(left) = cas.returning(&mut tx).await? else {
                return Ok(None);
            };
            tx.commit().await.at_commit()?;
            Ok(Some(sold(left)))
        })
    }

    fn release<'q>(product: &Product, due: u32) -> Stmt<'q, Self> {
        let through = &through(product.initial, product.settings.waves, 1)[0];
        Stmt(
            sqlx::query(
                "UPDATE products SET stock = stock + ($4::bigint[])[$3 + 1] - ($4::bigint[])[waves_released + 1], \
                 waves_released = $3 WHERE id = $1 AND epoch = $2 AND waves_released < $3",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(due as i32)
            .bind(through),
        )
    }

    /// (this reset's orders in the table, of `in_stream` those the table
    /// does not have yet). One query, so an order that moves from the
    /// stream into the table between the stream's read and this one is
    /// counted once.
    fn orders<'a>(
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)> {
        Box::pin(async move {
            Ok(sqlx::query_as(
                "SELECT (SELECT count(*) FROM orders WHERE product_id = $1 AND epoch = $2), \
                (SELECT count(*) FROM unnest($3::uuid[]) AS s(id) \
                 WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE o.order_id = s.id))",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(in_stream)
            .fetch_one(&backends.pg)
            .await?)
        })
    }

    /// The row's stock is written by the reset's own upsert; here only
    /// what the product left in MySQL goes.
    fn lay_out<'a>(
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        Box::pin(mysql::leave(backends, product, stale))
    }

    fn mark_returned<'a>(
        on: &'a mut PgConnection,
        orders: &'a [Order],
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
            Ok(sqlx::query_scalar(
                "UPDATE orders SET state = $2 WHERE order_id = ANY($1) AND state = $3 \
                 RETURNING user_id",
            )
            .bind(&ids)
            .bind(column::RETURNED)
            .bind(column::EXPIRED)
            .fetch_all(on)
            .await?)
        })
    }

    /// One statement for all the buyers.
    fn uncount<'a>(
        on: &'a mut PgConnection,
        product: &'a Product,
        buyers: &'a [String],
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query(
                "UPDATE buyer_counts AS c SET bought = GREATEST(c.bought - back.n, 0) \
                 FROM (SELECT user_id, count(*) AS n FROM unnest($3::text[]) AS user_id GROUP BY user_id) AS back \
                 WHERE c.product_id = $1 AND c.epoch = $2 AND c.user_id = back.user_id",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(buyers)
            .execute(on)
            .await?;
            Ok(())
        })
    }

    fn expire<'a>(backends: &'a Backends, order_ids: &'a [Uuid]) -> StoreFuture<'a, Vec<Uuid>> {
        Box::pin(async move {
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
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
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

    /// The locking read and the update in one statement.
    fn claim_due<'a>(
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(async move {
            let rows: Vec<OrderRow> = sqlx::query_as(concat!(
                "UPDATE orders SET state = $5 WHERE order_id IN ( \
                   SELECT order_id FROM orders WHERE product_id = $1 AND epoch = $2 \
                   AND state IS NULL AND order_id < $3 ORDER BY order_id LIMIT $4 \
                   FOR UPDATE SKIP LOCKED) AND state IS NULL RETURNING ",
                order_columns!()
            ))
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
}
