//! `db-pessimistic`: `SELECT … FOR UPDATE`, update, insert the order,
//! commit — the articles' pessimistic database lock.
//!
//! Known failure: none for correctness; every buyer queues on the row lock,
//! holding a connection and a transaction open for the whole section, so
//! the pool and the row are the ceiling.

use super::{Outcome, Strategy, on_mysql, section, store_of};
use crate::error::{AtCommit, BackendError};
use crate::info::{Expect, Hazard, Info};
use crate::limit;
use crate::product::StoreKind;
use crate::sale::BuyCtx;

/// The row-locking strategy.
pub struct DbPessimistic;

const INFO: Info = Info {
    id: "db-pessimistic",
    backend: "postgres",
    store: StoreKind::Postgres,
    stores: &[StoreKind::Postgres, StoreKind::Mysql],
    mechanism: "SELECT … FOR UPDATE, update, insert order, commit",
    safe: true,
    safe_against: "any concurrency, any number of instances, crashed or frozen clients (the transaction dies with the connection)",
    unsafe_against: "nothing for correctness; serializes every buyer on one row",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::SellsAll),
        (Hazard::FrozenHolder, Expect::NoOversell),
        (Hazard::HolderCrash, Expect::SellsAll),
        (Hazard::RepeatableRead, Expect::SellsAll),
    ],
    recipes: &[],
};

impl Strategy for DbPessimistic {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let product = ctx.product;
        let store = store_of(&INFO, product);
        // Not worth queueing on the row lock to be refused under it.
        if limit::already_reached(ctx, store).await? {
            return Ok(Outcome::LimitReached);
        }
        if store == StoreKind::Mysql {
            return on_mysql::pessimistic(ctx).await;
        }
        let mut tx = ctx.backends.pg.begin().await?;
        // FOR UPDATE takes the row lock now, so no other buyer can read
        // this stock until we commit: the read and the write cannot be
        // interleaved by anyone else.
        let stock: Option<i64> = sqlx::query_scalar(
            "SELECT stock FROM products WHERE id = $1 AND epoch = $2 FOR UPDATE",
        )
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
        if !limit::claim_pg(&mut tx, ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        sqlx::query("UPDATE products SET stock = stock - 1 WHERE id = $1")
            .bind(product.id)
            .execute(&mut *tx)
            .await?;
        ctx.order
            .bind_insert(sqlx::query(crate::orders::INSERT_SQL))
            .execute(&mut *tx)
            .await?;
        tx.commit().await.at_commit()?;
        Ok(Outcome::Sold {
            left: Some(stock - 1),
        })
    }
}
