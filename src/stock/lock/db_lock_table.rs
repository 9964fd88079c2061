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

use super::{Acquired, Lock, Token};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::backoff;
use crate::model::product::Product;
use crate::model::seam::BuyCtx;

/// The lock row's name for a product.
fn lock_name(product_id: i64) -> String {
    format!("product:{product_id}")
}

/// The lock-table lock. Its table is in the database that holds the
/// stock (the store's [`crate::model::seam::Store::lock_table`]): MySQL's for a
/// product stored there (the articles' MySQL lock table), PostgreSQL's
/// otherwise.
pub struct DbLockTable;

impl Lock for DbLockTable {
    type Guard = Token;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Token> {
        let name = lock_name(ctx.product.id);
        let owner = Uuid::new_v4().to_string();
        let table = ctx.store.lock_table();
        loop {
            if table.take_lock(ctx, &name, &owner).await? {
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
        ctx.store.lock_table().drop_lock(ctx, &name, &guard.0).await
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            lock_rows: vec![lock_name(product.id)],
            ..Footprint::default()
        }
    }
}
