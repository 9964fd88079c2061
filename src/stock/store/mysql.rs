//! MySQL/InnoDB's dialect of the SQL stores (see [`Dialect`]), as the
//! articles write it: a product stored here keeps its row and its orders
//! in MySQL (its definition stays in PostgreSQL).
//!
//! What differs is InnoDB more than the SQL: its default isolation is
//! REPEATABLE READ, where a locking read (`FOR UPDATE`, an `UPDATE`'s
//! scan) takes next-key locks — the row and the gap before it — that
//! PostgreSQL never takes (docs/scenarios.md measures one consequence),
//! and deadlocks are part of normal operation ([`Dialect::rolled_back`]).
//! MySQL has no `RETURNING` on `UPDATE`: a value comes back through
//! `LAST_INSERT_ID(expr)`, in the statement's OK packet. No trigger moves
//! `version`: every statement that writes the stock bumps it itself.

use sqlx::mysql::{MySqlConnection, MySqlDatabaseError};
use sqlx::{MySql, MySqlPool};
use uuid::Uuid;

use super::dialect::{Dialect, Query, Statements, Stmt, again, plumbing, with_order};
use super::innodb;
use crate::backends::failure::{AtCommit, BackendError};
use crate::backends::{Backends, Footprint};
use crate::model::order::state::column;
use crate::model::order::{Order, order_columns};
use crate::model::product::shares::through;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{BuyCtx, Outcome, StoreFuture};
use crate::stock::limit;

/// MySQL.
pub struct Mysql;

impl Dialect for Mysql {
    type Db = MySql;
    const KIND: StoreKind = StoreKind::Mysql;
    const SQL: Statements = Statements {
        read: "SELECT stock FROM products WHERE id = ? AND epoch = ?",
        fence: "UPDATE products SET fence = GREATEST(fence, ?), stock = LAST_INSERT_ID(stock) \
            WHERE id = ? AND epoch = ?",
        // Found rows, not changed rows: a lost update that writes the
        // value already there still matches.
        write: "UPDATE products SET stock = ?, version = version + 1 \
            WHERE id = ? AND epoch = ? AND (? IS NULL OR fence <= ?)",
        bought: "SELECT CAST(bought AS SIGNED) FROM buyer_counts \
            WHERE product_id = ? AND epoch = ? AND user_id = ?",
        find_order: concat!(
            "SELECT ",
            order_columns!(),
            " FROM orders WHERE order_id = ?"
        ),
        waves_held: "SELECT waves_released FROM products WHERE id = ?",
        mark: "SELECT stock, version FROM products WHERE id = ?",
        set_stock: "UPDATE products SET stock = ?, version = version + 1 \
            WHERE id = ? AND epoch = ? AND version = ?",
        put_back: "UPDATE products SET stock = stock + ?, version = version + 1 \
            WHERE id = ? AND epoch = ?",
        add: "INSERT IGNORE INTO additions (product_id, epoch, addition_id, units) \
            VALUES (?, ?, ?, ?)",
        added: "SELECT CAST(COALESCE(SUM(units), 0) AS SIGNED) FROM additions \
            WHERE product_id = ? AND epoch = ?",
        for_update: "SELECT stock FROM products WHERE id = ? AND epoch = ? FOR UPDATE",
        take_one: "UPDATE products SET stock = stock - 1, version = version + 1 WHERE id = ?",
        // A plain autocommit read: its own snapshot, so the isolation
        // level does not stale it.
        versioned: "SELECT stock, version FROM products WHERE id = ? AND epoch = ?",
        // Named for this transaction rather than left to the server's
        // default.
        repeatable_read: "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; START TRANSACTION",
        set_left: "UPDATE products SET stock = ?, version = version + 1 WHERE id = ?",
        // `IGNORE` turns the duplicate name into "no row inserted" (an
        // upsert would answer 1 either way: sqlx counts found rows).
        lock_insert: "INSERT IGNORE INTO locks (name, owner, lease_ms, acquired_at) \
            VALUES (?, ?, ?, NOW(6))",
        lock_take_over: "UPDATE locks SET owner = ?, lease_ms = ?, acquired_at = NOW(6) \
            WHERE name = ? AND acquired_at + INTERVAL lease_ms * 1000 MICROSECOND < NOW(6)",
        lock_drop: "DELETE FROM locks WHERE name = ? AND owner = ?",
        insert_order: concat!(
            "INSERT INTO orders (",
            order_columns!(),
            ") VALUES (?, ?, ?, ?, ?, ?)"
        ),
        find: concat!(
            "SELECT ",
            order_columns!(),
            ", state, paid_at_ms FROM orders WHERE order_id = ?"
        ),
        pay: "UPDATE orders SET state = ?, paid_at_ms = ? WHERE order_id = ? \
            AND state IS NULL AND (? IS NULL OR order_id >= ?)",
        due: concat!(
            "SELECT ",
            order_columns!(),
            " FROM orders WHERE product_id = ? AND epoch = ? \
            AND state <=> ? AND (? IS NULL OR order_id < ?) ORDER BY order_id LIMIT ?"
        ),
        tally: "SELECT CAST(COALESCE(SUM(state IS NULL), 0) AS SIGNED), \
            CAST(COALESCE(SUM(paid_at_ms IS NOT NULL), 0) AS SIGNED), \
            CAST(COALESCE(SUM(state IN (?, ?) AND paid_at_ms IS NULL), 0) AS SIGNED), \
            CAST(COALESCE(SUM(state = ?), 0) AS SIGNED), \
            CAST(COALESCE(SUM(state = ?), 0) AS SIGNED), \
            CAST(COALESCE(SUM(state = ? AND paid_at_ms IS NOT NULL), 0) AS SIGNED) \
            FROM orders WHERE product_id = ? AND epoch = ?",
    };

    fn pool(backends: &Backends) -> Result<&MySqlPool, BackendError> {
        backends.mysql()
    }

    fn configured(backends: &Backends) -> Option<&MySqlPool> {
        backends.mysql.as_ref()
    }

    plumbing!();

    fn returning<'a>(
        query: Query<'a, Self>,
        on: &'a mut MySqlConnection,
    ) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            let done = query.execute(on).await?;
            // sqlx asks for found rows: 1 even when nothing changed.
            Ok((done.rows_affected() > 0).then(|| done.last_insert_id() as i64))
        })
    }

    /// Chosen as a deadlock's victim (1213) or waited past
    /// `innodb_lock_wait_timeout` (1205).
    fn rolled_back(error: &BackendError) -> bool {
        let BackendError::Sql(sqlx::Error::Database(db)) = error else {
            return false;
        };
        db.try_downcast_ref::<MySqlDatabaseError>()
            .is_some_and(|e| matches!(e.number(), 1213 | 1205))
    }

    fn serialization_failure(_error: &BackendError) -> bool {
        false
    }

    fn claim<'a>(on: &'a mut MySqlConnection, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, bool> {
        Box::pin(limit::claim_mysql(on, ctx))
    }

    /// The decrement, its stock left coming back as `LAST_INSERT_ID`,
    /// then the order.
    fn sell<'a>(on: &'a mut MySqlConnection, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<i64>> {
        Box::pin(async move {
            let left = Stmt::<Self>::new(
                "UPDATE products SET stock = LAST_INSERT_ID(stock - 1), version = version + 1 \
                 WHERE id = ? AND epoch = ? AND stock > 0",
            )
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .returning(&mut *on)
            .await?;
            if left.is_some() {
                with_order::<Self>(Self::SQL.insert_order, ctx.order)
                    .run(on)
                    .await?;
            }
            Ok(left)
        })
    }

    /// `seckill_sell_one`, the limit included.
    fn sell_now<'a>(ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome> {
        Box::pin(async move {
            Ok(match sell_one(ctx, None).await? {
                SellOne::Sold(left) => Outcome::Sold { left: Some(left) },
                SellOne::NoMatch => Outcome::SoldOut,
                SellOne::LimitReached => Outcome::LimitReached,
            })
        })
    }

    /// The version check, the decrement and the order in one statement,
    /// the buyer's limit included.
    fn compare_and_set<'a>(ctx: &'a BuyCtx<'a>, version: i64) -> StoreFuture<'a, Option<Outcome>> {
        Box::pin(async move {
            Ok(match sell_one(ctx, Some(version)).await? {
                SellOne::Sold(left) => Some(Outcome::Sold { left: Some(left) }),
                SellOne::NoMatch => None,
                SellOne::LimitReached => Some(Outcome::LimitReached),
            })
        })
    }

    /// MySQL has no arrays: the cumulative shares as a JSON array, indexed
    /// by the waves the row holds (`stock` is assigned first, so it reads
    /// the old `waves_released`).
    fn release<'q>(product: &Product, due: u32) -> Stmt<'q, Self> {
        let through = &through(product.initial, product.settings.waves, 1)[0];
        Stmt::new(
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
    }

    /// Never in a stream: MySQL's own `orders`.
    fn orders<'a>(
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

    /// The row written with the new epoch and wave 1's stock, the
    /// product's old orders, buyer counts and lock rows gone, in one
    /// MySQL transaction.
    fn lay_out<'a>(
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let first_wave = through(product.initial, product.settings.waves, 1)[0][1];
            let mysql = backends.mysql()?;
            innodb::reset(mysql, product, Some(first_wave), &stale.lock_rows).await
        })
    }

    fn mark_returned<'a>(
        on: &'a mut MySqlConnection,
        orders: &'a [Order],
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(innodb::mark_returned(on, orders))
    }

    /// One statement per buyer.
    fn uncount<'a>(
        on: &'a mut MySqlConnection,
        product: &'a Product,
        buyers: &'a [String],
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            for buyer in buyers {
                sqlx::query(
                    "UPDATE buyer_counts SET bought = bought - 1 \
                     WHERE product_id = ? AND epoch = ? AND user_id = ? AND bought > 0",
                )
                .bind(product.id)
                .bind(product.epoch)
                .bind(buyer)
                .execute(&mut *on)
                .await?;
            }
            Ok(())
        })
    }

    fn expire<'a>(backends: &'a Backends, order_ids: &'a [Uuid]) -> StoreFuture<'a, Vec<Uuid>> {
        Box::pin(async move { innodb::expire(backends.mysql()?, order_ids).await })
    }

    fn returned<'a>(
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let mut update = sqlx::QueryBuilder::<MySql>::new("UPDATE orders SET state = ");
            update.push_bind(column::RETURNED);
            update.push(" WHERE (");
            update.push_bind(blindly);
            update.push(" OR state = ");
            update.push_bind(column::EXPIRED);
            update.push(") AND order_id IN ");
            innodb::in_list(&mut update, order_ids);
            update.build().execute(backends.mysql()?).await?;
            Ok(())
        })
    }

    fn claim_due<'a>(
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(async move { innodb::claim_due(backends.mysql()?, product, cutoff, limit).await })
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
        Some(mysql) => innodb::reset(mysql, product, None, &stale.lock_rows).await,
        None => Ok(()),
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
    again::<Mysql, _, _, _>(|| async {
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
    })
    .await
}
