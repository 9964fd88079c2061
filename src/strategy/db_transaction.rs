//! `db-transaction`: the whole section in one REPEATABLE READ transaction
//! and nothing else — read the stock with a plain `SELECT`, work, write
//! back the value read minus one, insert the order, commit. The articles'
//! "the method is `@Transactional`, so it is safe" belief.
//!
//! Whether it holds depends on the database, not on the code:
//! - PostgreSQL's REPEATABLE READ is snapshot isolation with "first
//!   updater wins": a transaction that writes a row another committed
//!   since its snapshot fails (SQLSTATE 40001). Nothing was written; the
//!   buyer's transaction is run again from a new snapshot, up to
//!   `max_retries` times (then `busy`). No oversell.
//! - InnoDB's REPEATABLE READ reads from the snapshot but writes on top
//!   of the newest row (an `UPDATE` is a "current read"), so the second
//!   writer overwrites the first's decrement with the same value: a lost
//!   update, and one order more than the stock. (MariaDB 11.8 turns on
//!   `innodb_snapshot_isolation`, which refuses that write as PostgreSQL
//!   does; the 10.11 Debian ships and the lab runs does not.)
//!
//! Its own store is MySQL, the articles' database, where it fails; the
//! comparison races it on PostgreSQL too (`db-transaction@postgres`), and
//! the `repeatable-read` scenario races it on both with the same settings.

use std::time::{Duration, Instant};

use super::{Outcome, Strategy, section, store_of};
use crate::backoff;
use crate::error::{AtCommit, BackendError};
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::orders::INSERT_SQL;
use crate::product::StoreKind;
use crate::sale::BuyCtx;
use crate::store::mysql_store::bind_order;

/// The transaction-only strategy.
pub struct DbTransaction;

const INFO: Info = Info {
    id: "db-transaction",
    backend: "mysql",
    store: StoreKind::Mysql,
    stores: &[StoreKind::Mysql, StoreKind::Postgres],
    mechanism: "one REPEATABLE READ transaction: plain SELECT, work, UPDATE to the value read minus one, insert order, commit; retried on a serialization failure",
    safe: false,
    safe_against: "contention on PostgreSQL (first updater wins: the loser's transaction fails and is retried)",
    unsafe_against: "contention on MySQL/InnoDB (the write lands on the newer row: a lost update)",
    under: &[
        (Hazard::Contention, Expect::Oversells),
        (Hazard::RepeatableRead, Expect::Oversells),
    ],
    recipes: &[],
};

/// What one transaction did.
enum Attempt {
    /// It ended (sold, sold out, limit): the buyer's answer.
    Done(Outcome),
    /// PostgreSQL refused it (40001): run it again.
    Serialization,
}

impl Strategy for DbTransaction {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let on_mysql = store_of(&INFO, ctx.product) == StoreKind::Mysql;
        for attempt in 0..=ctx.product.settings.max_retries {
            let done = if on_mysql {
                Attempt::Done(on_mysql_once(ctx).await?)
            } else {
                on_pg_once(ctx).await?
            };
            match done {
                Attempt::Done(outcome) => return Ok(outcome),
                Attempt::Serialization => {
                    let cap = Instant::now() + Duration::from_millis(8);
                    tokio::time::sleep(backoff::delay(attempt, cap)).await;
                }
            }
        }
        Ok(Outcome::busy(
            "serialization failure max_retries times: others kept writing first",
        ))
    }
}

/// The transaction on PostgreSQL; a serialization failure of any of its
/// statements (the stock's UPDATE, or the buyer's count) rolled it back.
async fn on_pg_once(ctx: &BuyCtx<'_>) -> Result<Attempt, BackendError> {
    match pg_transaction(ctx).await {
        Err(BackendError::Sql(sqlx::Error::Database(db)))
            if db.code().as_deref() == Some("40001") =>
        {
            Ok(Attempt::Serialization)
        }
        done => done.map(Attempt::Done),
    }
}

async fn pg_transaction(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let product = ctx.product;
    let mut tx = ctx
        .backends
        .pg
        .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .await?;
    let stock: Option<i64> =
        sqlx::query_scalar("SELECT stock FROM products WHERE id = $1 AND epoch = $2")
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
    sqlx::query("UPDATE products SET stock = $1 WHERE id = $2")
        .bind(stock - 1)
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    ctx.order
        .bind_insert(sqlx::query(INSERT_SQL))
        .execute(&mut *tx)
        .await?;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold {
        left: Some(stock - 1),
    })
}

/// The same transaction on InnoDB, at the same isolation level, named
/// for this transaction rather than left to the server's default.
async fn on_mysql_once(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
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
        return Ok(Outcome::busy("the product was reset during the buy"));
    };
    if stock <= 0 {
        return Ok(Outcome::SoldOut);
    }
    section::work(ctx).await;
    sqlx::query("UPDATE products SET stock = ? WHERE id = ?")
        .bind(stock - 1)
        .bind(product.id)
        .execute(&mut *tx)
        .await?;
    if !limit::claim_mysql(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    bind_order(ctx).execute(&mut *tx).await?;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold {
        left: Some(stock - 1),
    })
}
