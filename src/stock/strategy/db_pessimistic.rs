//! `db-pessimistic`: `SELECT … FOR UPDATE`, update, insert the order,
//! commit — the articles' pessimistic database lock.
//!
//! Known failure: none for correctness; every buyer queues on the row lock,
//! holding a connection and a transaction open for the whole section, so
//! the pool and the row are the ceiling.

use super::{Outcome, Strategy};
use crate::backends::failure::BackendError;
use crate::model::info::{Expect, Hazard, Info};
use crate::model::product::StoreKind;
use crate::model::seam::BuyCtx;
use crate::stock::limit;

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
        // Not worth queueing on the row lock to be refused under it.
        if limit::already_reached(ctx).await? {
            return Ok(Outcome::LimitReached);
        }
        Ok(ctx.rows()?.pessimistic(ctx).await?.into())
    }
}
