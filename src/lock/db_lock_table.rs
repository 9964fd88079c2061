//! `db-lock-table`: a lock table with a unique name — insert the row to
//! acquire, delete it (by owner) to release; a row older than its lease is
//! stale (a crashed holder's) and is taken over. The articles' "database
//! distributed lock".
//!
//! Known failure: the lease, like every lease: a holder alive but slower
//! than `lease_ms` has its row taken over and two buyers are in the
//! section. Safe while holders are alive and within their lease.

use std::time::Instant;

use uuid::Uuid;

use super::{Lock, Token};
use crate::backends::Footprint;
use crate::backoff;
use crate::error::BackendError;
use crate::info::{Expect, Hazard, Info};
use crate::product::{Product, StoreKind};
use crate::sale::BuyCtx;
use crate::store::mysql_store;

/// The `db-lock-table` strategy's catalogue entry.
pub const INFO: Info = Info {
    id: "db-lock-table",
    backend: "postgres",
    store: StoreKind::Postgres,
    stores: &[StoreKind::Postgres, StoreKind::Mysql, StoreKind::Redis],
    mechanism: "INSERT a row with a unique lock name to acquire, DELETE by owner to release; rows older than the lease are taken over",
    safe: true,
    safe_against: "many instances; a crashed holder (its row goes stale after lease_ms)",
    unsafe_against: "a live holder slower than lease_ms (its row is taken over)",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::Oversells),
        (Hazard::FrozenHolder, Expect::Oversells),
        (Hazard::HolderCrash, Expect::SellsAll),
        (Hazard::Partition, Expect::SellsAll),
        (Hazard::PartitionWithStore, Expect::Oversells),
    ],
    recipes: &[],
};

/// The lock row's name for a product.
fn lock_name(product_id: i64) -> String {
    format!("product:{product_id}")
}

/// Takes a free lock: the unique name makes the INSERT the acquisition.
/// `DO NOTHING` checks the index without locking a held row, so waiters do
/// not queue on the holder's row lock.
const INSERT_SQL: &str = "INSERT INTO locks (name, owner, lease_ms, acquired_at) \
     VALUES ($1, $2, $3, clock_timestamp()) ON CONFLICT (name) DO NOTHING RETURNING owner";

/// Takes over a stale lock (a crashed holder's): only a row past its lease
/// matches the `WHERE`, so a live holder's row is never touched.
const TAKE_OVER_SQL: &str = "UPDATE locks SET owner = $2, lease_ms = $3, acquired_at = clock_timestamp() \
     WHERE name = $1 AND acquired_at + lease_ms * interval '1 millisecond' < clock_timestamp() \
     RETURNING owner";

/// [`INSERT_SQL`] in MySQL: `IGNORE` turns the duplicate name into "no
/// row inserted" (an upsert would answer 1 either way: sqlx counts found
/// rows).
const MYSQL_INSERT_SQL: &str = "INSERT IGNORE INTO locks (name, owner, lease_ms, acquired_at) \
     VALUES (?, ?, ?, NOW(6))";

/// [`TAKE_OVER_SQL`] in MySQL.
const MYSQL_TAKE_OVER_SQL: &str = "UPDATE locks SET owner = ?, lease_ms = ?, acquired_at = NOW(6) \
     WHERE name = ? AND acquired_at + INTERVAL lease_ms * 1000 MICROSECOND < NOW(6)";

/// The lock-table lock. Its table is in the database that holds the
/// stock: MySQL's for a product stored there (the articles' MySQL lock
/// table), PostgreSQL's otherwise.
pub struct DbLockTable;

/// Tries once to take the lock, as `owner`, in MySQL's table. InnoDB
/// deadlocks here under contention (the duplicate-key check takes a shared
/// lock on the held row, which the holder's DELETE then waits for): the
/// victim took nothing, and tries again like any waiter.
async fn take_in_mysql(ctx: &BuyCtx<'_>, name: &str, owner: &str) -> Result<bool, BackendError> {
    match try_take_in_mysql(ctx, name, owner).await {
        Err(error) if mysql_store::rolled_back(&error) => Ok(false),
        taken => taken,
    }
}

async fn try_take_in_mysql(
    ctx: &BuyCtx<'_>,
    name: &str,
    owner: &str,
) -> Result<bool, BackendError> {
    let mysql = ctx.backends.mysql()?;
    let lease = ctx.product.settings.lease_ms as i64;
    let inserted = sqlx::query(MYSQL_INSERT_SQL)
        .bind(name)
        .bind(owner)
        .bind(lease)
        .execute(mysql)
        .await?
        .rows_affected();
    if inserted == 1 {
        return Ok(true);
    }
    let taken = sqlx::query(MYSQL_TAKE_OVER_SQL)
        .bind(owner)
        .bind(lease)
        .bind(name)
        .execute(mysql)
        .await?
        .rows_affected();
    Ok(taken == 1)
}

/// Tries once to take the lock, as `owner`, in PostgreSQL's table.
async fn take_in_pg(ctx: &BuyCtx<'_>, name: &str, owner: &str) -> Result<bool, BackendError> {
    for sql in [INSERT_SQL, TAKE_OVER_SQL] {
        let took: Option<String> = sqlx::query_scalar(sql)
            .bind(name)
            .bind(owner)
            .bind(ctx.product.settings.lease_ms as i64)
            .fetch_optional(&ctx.backends.pg)
            .await?;
        if took.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether the product's lock table is MySQL's.
fn in_mysql(ctx: &BuyCtx<'_>) -> bool {
    ctx.product.settings.store.unwrap_or(INFO.store) == StoreKind::Mysql
}

impl Lock for DbLockTable {
    type Guard = Token;

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        deadline: Instant,
    ) -> Result<Option<Token>, BackendError> {
        let name = lock_name(ctx.product.id);
        let owner = Uuid::new_v4().to_string();
        let mysql = in_mysql(ctx);
        loop {
            let took = if mysql {
                take_in_mysql(ctx, &name, &owner).await?
            } else {
                take_in_pg(ctx, &name, &owner).await?
            };
            if took {
                return Ok(Some(Token(owner)));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // Every attempt is two statements on the holder's database:
            // a crowd that has waited long backs off to 250 ms.
            tokio::time::sleep(backoff::delay_since(ctx.started, 250, deadline)).await;
        }
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: Token) -> Result<(), BackendError> {
        let name = lock_name(ctx.product.id);
        if in_mysql(ctx) {
            // A release InnoDB picks as a deadlock's victim is run again:
            // otherwise the lock would stay held until its lease ran out.
            let mysql = ctx.backends.mysql()?;
            mysql_store::again_if_rolled_back(|| async {
                sqlx::query("DELETE FROM locks WHERE name = ? AND owner = ?")
                    .bind(&name)
                    .bind(&guard.0)
                    .execute(mysql)
                    .await?;
                Ok(())
            })
            .await?;
        } else {
            sqlx::query("DELETE FROM locks WHERE name = $1 AND owner = $2")
                .bind(name)
                .bind(&guard.0)
                .execute(&ctx.backends.pg)
                .await?;
        }
        Ok(())
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            lock_rows: vec![lock_name(product.id)],
            ..Footprint::default()
        }
    }
}
