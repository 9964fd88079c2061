//! The database strategies' flows (see [`Rows`]), once for both
//! databases: the same mechanisms on PostgreSQL and InnoDB, each
//! statement in its [`Dialect`]'s words. What differs is InnoDB, not the
//! code: at REPEATABLE READ its locking reads take next-key locks that
//! PostgreSQL never takes (docs/scenarios.md measures one consequence).

use std::marker::PhantomData;

use super::dialect::{Conn, Dialect, Stmt, again, connect, record};
use crate::backends::failure::{AtCommit, BackendError};
use crate::model::seam::{BuyCtx, Outcome, Rows, StoreFuture};

/// Dialect `D`'s way of running each database strategy.
pub struct SqlRows<D>(pub PhantomData<fn() -> D>);

impl<D: Dialect> Rows for SqlRows<D> {
    fn atomic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome> {
        Box::pin(atomic::<D>(ctx))
    }

    fn pessimistic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome> {
        Box::pin(pessimistic::<D>(ctx))
    }

    fn versioned<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<(i64, i64)>> {
        Box::pin(async move {
            Stmt::<D>::new(D::SQL.versioned)
                .bind(ctx.product.id)
                .bind(ctx.product.epoch)
                .optional(&mut *connect::<D>(ctx.backends).await?)
                .await
        })
    }

    fn compare_and_set<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        version: i64,
    ) -> StoreFuture<'a, Option<Outcome>> {
        D::compare_and_set(ctx, version)
    }

    fn transaction<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<Outcome>> {
        Box::pin(async move {
            match transaction::<D>(ctx).await {
                Err(error) if D::serialization_failure(&error) => Ok(None),
                done => done.map(Some),
            }
        })
    }

    /// InnoDB deadlocks here under contention (the duplicate-key check
    /// takes a shared lock on the held row, which the holder's DELETE then
    /// waits for): the victim took nothing, and tries again like any
    /// waiter.
    fn take_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            match take_lock::<D>(ctx, name, owner).await {
                Err(error) if D::rolled_back(&error) => Ok(false),
                taken => taken,
            }
        })
    }

    /// A release InnoDB picks as a deadlock's victim is run again:
    /// otherwise the lock would stay held until its lease ran out.
    fn drop_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, ()> {
        Box::pin(again::<D, _, _, _>(move || async move {
            Stmt::<D>::new(D::SQL.lock_drop)
                .bind(name)
                .bind(owner)
                .run(&mut *connect::<D>(ctx.backends).await?)
                .await?;
            Ok(())
        }))
    }
}

/// `db-atomic`: the conditional decrement `stock > 0` with the order in
/// one round trip ([`Dialect::sell_now`]); with business work, in a
/// transaction that holds the row lock through the work, as a real order
/// service would.
async fn atomic<D: Dialect>(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    if ctx.product.settings.work_ms == 0 {
        return D::sell_now(ctx).await;
    }
    let mut tx = D::pool(ctx.backends)?.begin().await?;
    // The buyer's row first: it is locked only against the same buyer's
    // requests, so the hot product row is not held any longer.
    if !D::claim(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    let Some(left) = D::sell(&mut tx, ctx).await? else {
        return Ok(Outcome::SoldOut);
    };
    ctx.work().await;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold { left: Some(left) })
}

/// `db-pessimistic`: `SELECT … FOR UPDATE` takes the row lock now, so no
/// other buyer can read this stock until we commit: the read and the
/// write cannot be interleaved by anyone else.
async fn pessimistic<D: Dialect>(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let mut tx = D::pool(ctx.backends)?.begin().await?;
    let stock = match read_and_work::<D>(&mut tx, ctx, D::SQL.for_update).await? {
        Ok(stock) => stock,
        Err(unsold) => return Ok(unsold),
    };
    if !D::claim(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    Stmt::<D>::new(D::SQL.take_one)
        .bind(ctx.product.id)
        .run(&mut tx)
        .await?;
    record::<D>(tx, ctx, stock - 1).await
}

/// `db-transaction`: a REPEATABLE READ transaction of a plain read, the
/// work, and a write of the value read minus one. PostgreSQL's snapshot
/// isolation lets the first updater win; InnoDB's write lands on the
/// newest row whatever the read saw.
async fn transaction<D: Dialect>(ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
    let pool = D::pool(ctx.backends)?;
    let mut tx = pool.begin_with(D::SQL.repeatable_read).await?;
    let stock = match read_and_work::<D>(&mut tx, ctx, D::SQL.read).await? {
        Ok(stock) => stock,
        Err(unsold) => return Ok(unsold),
    };
    Stmt::<D>::new(D::SQL.set_left)
        .bind(stock - 1)
        .bind(ctx.product.id)
        .run(&mut tx)
        .await?;
    if !D::claim(&mut tx, ctx).await? {
        return Ok(Outcome::LimitReached);
    }
    record::<D>(tx, ctx, stock - 1).await
}

/// Reads the stock with `read` (id, epoch) in the caller's transaction
/// and, if there is some to sell, does the business work: the stock read,
/// or why nothing is sold (the product was reset, or sold out).
async fn read_and_work<D: Dialect>(
    tx: &mut Conn<D>,
    ctx: &BuyCtx<'_>,
    read: &'static str,
) -> Result<Result<i64, Outcome>, BackendError> {
    let stock: Option<(i64,)> = Stmt::<D>::new(read)
        .bind(ctx.product.id)
        .bind(ctx.product.epoch)
        .optional(tx)
        .await?;
    Ok(match stock {
        None => Err(Outcome::Reset),
        Some((stock,)) if stock <= 0 => Err(Outcome::SoldOut),
        Some((stock,)) => {
            ctx.work().await;
            Ok(stock)
        }
    })
}

/// `db-lock-table`'s one try: a free row (the unique name makes the
/// INSERT the acquisition), else one past its lease (a crashed holder's).
async fn take_lock<D: Dialect>(
    ctx: &BuyCtx<'_>,
    name: &str,
    owner: &str,
) -> Result<bool, BackendError> {
    let conn = &mut *connect::<D>(ctx.backends).await?;
    let lease = ctx.product.settings.lease_ms as i64;
    let inserted = Stmt::<D>::new(D::SQL.lock_insert)
        .bind(name)
        .bind(owner)
        .bind(lease)
        .run(conn)
        .await?;
    if inserted == 1 {
        return Ok(true);
    }
    let taken = Stmt::<D>::new(D::SQL.lock_take_over)
        .bind(owner)
        .bind(lease)
        .bind(name)
        .run(conn)
        .await?;
    Ok(taken == 1)
}
