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

/// The `db-lock-table` strategy's catalogue entry.
pub const INFO: Info = Info {
    id: "db-lock-table",
    backend: "postgres",
    store: StoreKind::Postgres,
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

/// The lock-table lock.
pub struct DbLockTable;

impl Lock for DbLockTable {
    type Guard = Token;

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        deadline: Instant,
    ) -> Result<Option<Token>, BackendError> {
        let name = lock_name(ctx.product.id);
        let owner = Uuid::new_v4().to_string();
        loop {
            for sql in [INSERT_SQL, TAKE_OVER_SQL] {
                let took: Option<String> = sqlx::query_scalar(sql)
                    .bind(&name)
                    .bind(&owner)
                    .bind(ctx.product.settings.lease_ms as i64)
                    .fetch_optional(&ctx.backends.pg)
                    .await?;
                if took.is_some() {
                    return Ok(Some(Token(owner)));
                }
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
        sqlx::query("DELETE FROM locks WHERE name = $1 AND owner = $2")
            .bind(lock_name(ctx.product.id))
            .bind(&guard.0)
            .execute(&ctx.backends.pg)
            .await?;
        Ok(())
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            lock_rows: vec![lock_name(product.id)],
            ..Footprint::default()
        }
    }
}
