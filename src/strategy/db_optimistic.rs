//! `db-optimistic`: read stock and version, then `UPDATE … WHERE version =
//! $v` (compare-and-set), retried a bounded number of times — the articles'
//! optimistic lock.
//!
//! Known failure: none for correctness, but under contention most updates
//! lose the race; buyers that exhaust `max_retries` give up as `busy`, so
//! it may sell fewer units than a queueing strategy in the same time.

use std::time::{Duration, Instant};

use sqlx::Row;

use super::{Outcome, Strategy, on_mysql, section, store_of};
use crate::backoff;
use crate::error::{AtCommit, BackendError};
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::orders::insert_if_sold;
use crate::product::StoreKind;
use crate::sale::BuyCtx;

/// The compare-and-set: the UPDATE matches only if nobody wrote since our
/// read (same version, same reset); the INSERT records the order only then.
const CAS_SQL: &str = insert_if_sold!(
    "UPDATE products SET stock = stock - 1, version = version + 1 \
     WHERE id = $2 AND epoch = $3 AND version = $7 AND stock > 0 RETURNING stock"
);

/// The optimistic-version strategy.
pub struct DbOptimistic;

const INFO: Info = Info {
    id: "db-optimistic",
    backend: "postgres",
    store: StoreKind::Postgres,
    stores: &[StoreKind::Postgres, StoreKind::Mysql],
    mechanism: "read stock and version; UPDATE … WHERE version = $v; bounded retries",
    safe: true,
    safe_against: "any concurrency, any number of instances, crashed clients",
    unsafe_against: "nothing for correctness; under contention buyers run out of retries (busy)",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::NoOversell),
        (Hazard::RepeatableRead, Expect::SellsAll),
    ],
    recipes: &[],
};

impl Strategy for DbOptimistic {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let product = ctx.product;
        let on_mysql = store_of(&INFO, product) == StoreKind::Mysql;
        for attempt in 0..=product.settings.max_retries {
            let row: Option<(i64, i64)> = if on_mysql {
                on_mysql::versioned(ctx).await?
            } else {
                sqlx::query_as("SELECT stock, version FROM products WHERE id = $1 AND epoch = $2")
                    .bind(product.id)
                    .bind(product.epoch)
                    .fetch_optional(&ctx.backends.pg)
                    .await?
            };
            let Some((stock, version)) = row else {
                return Ok(Outcome::busy("the product was reset during the buy"));
            };
            if stock <= 0 {
                return Ok(Outcome::SoldOut);
            }
            section::work(ctx).await;
            let cas = if on_mysql {
                // The version check, the decrement and the order in one
                // statement, the buyer's limit included.
                match on_mysql::sell_one(ctx, Some(version)).await? {
                    on_mysql::Sold::Sold(left) => Cas::Sold(left),
                    on_mysql::Sold::NoMatch => Cas::Lost,
                    on_mysql::Sold::LimitReached => Cas::LimitReached,
                }
            } else {
                compare_and_set(ctx, version).await?
            };
            match cas {
                Cas::Sold(left) => return Ok(Outcome::Sold { left: Some(left) }),
                Cas::LimitReached => return Ok(Outcome::LimitReached),
                Cas::Lost => {}
            }
            // Retries are bounded by count; each pause is a few ms of jitter
            // so the losers do not collide again in lock-step.
            let cap = Instant::now() + Duration::from_millis(8);
            tokio::time::sleep(backoff::delay(attempt, cap)).await;
        }
        Ok(Outcome::busy("optimistic update lost max_retries times"))
    }
}

/// What one compare-and-set did.
enum Cas {
    /// Sold; the stock left.
    Sold(i64),
    LimitReached,
    /// Somebody wrote since our read: retry.
    Lost,
}

/// The CAS with the order; with a per-user limit, the buyer's unit is
/// claimed in the same transaction (and rolled back with a lost CAS).
async fn compare_and_set(ctx: &BuyCtx<'_>, version: i64) -> Result<Cas, BackendError> {
    let cas = ctx.order.bind_insert(sqlx::query(CAS_SQL)).bind(version);
    if ctx.product.settings.per_user_limit == 0 {
        let left = cas.fetch_optional(&ctx.backends.pg).await.at_commit()?;
        return Ok(left.map_or(Cas::Lost, |row| Cas::Sold(row.get(0))));
    }
    let mut tx = ctx.backends.pg.begin().await?;
    if !limit::claim_pg(&mut tx, ctx).await? {
        return Ok(Cas::LimitReached);
    }
    let Some(row) = cas.fetch_optional(&mut *tx).await? else {
        return Ok(Cas::Lost);
    };
    let left: i64 = row.get(0);
    tx.commit().await.at_commit()?;
    Ok(Cas::Sold(left))
}
