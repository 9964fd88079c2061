//! The SQL store: a product's stock in its database's `products` row,
//! written in one transaction with the order's INSERT into that database's
//! `orders` — PostgreSQL's (where every order but a MySQL-stored
//! product's ends up) or MySQL's (the articles' own setup). One flow for
//! both; what the databases say differently is their [`Dialect`].

use std::marker::PhantomData;
use std::time::Duration;

use uuid::Uuid;

use super::dialect::{Dialect, Stmt, again, connect, record};
use super::sql_book::SqlBook;
use super::sql_rows::SqlRows;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::order::Order;
use crate::model::order::state::OrderRow;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{Added, Addition, Book, BuyCtx, Mark, Outcome, Rows, Store, StoreFuture};

/// A product's stock in dialect `D`'s `products` row, its orders in `D`'s
/// `orders` (the product's definition stays in PostgreSQL).
pub struct SqlStore<D>(pub PhantomData<fn() -> D>);

impl<D: Dialect> Store for SqlStore<D> {
    fn kind(&self) -> StoreKind {
        D::KIND
    }

    fn orders_in(&self) -> StoreKind {
        D::KIND
    }

    fn rows(&self) -> Option<&'static dyn Rows> {
        Some(&SqlRows::<D>(PhantomData))
    }

    fn lock_table(&self) -> &'static dyn Rows {
        &SqlRows::<D>(PhantomData)
    }

    fn book(&self) -> &'static dyn Book {
        &SqlBook::<D>(PhantomData)
    }

    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        orders: &'a [Order],
        once: bool,
    ) -> StoreFuture<'a, usize> {
        Box::pin(again::<D, _, _, _>(move || restock::<D>(ctx, orders, once)))
    }

    fn add<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        addition: Addition,
    ) -> StoreFuture<'a, Added> {
        Box::pin(again::<D, _, _, _>(move || add::<D>(ctx, addition)))
    }

    fn added<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let sum: Option<(i64,)> = Stmt::<D>::new(D::SQL.added)
                .bind(product.id)
                .bind(product.epoch)
                .optional(&mut *connect::<D>(backends).await?)
                .await?;
            Ok(sum.map_or(0, |(sum,)| sum))
        })
    }

    fn set_stock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let set = Stmt::<D>::new(D::SQL.set_stock)
                .bind(stock)
                .bind(ctx.product.id)
                .bind(ctx.product.epoch)
                .bind(expected.moves)
                .run(&mut *connect::<D>(ctx.backends).await?)
                .await?;
            Ok(set == 1)
        })
    }

    fn recheck_every(&self) -> Duration {
        Duration::from_millis(250)
    }

    fn read<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        fence: Option<u64>,
    ) -> StoreFuture<'a, i64> {
        Box::pin(read::<D>(ctx, fence))
    }

    fn write<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        _cell: usize,
        new_stock: i64,
        fence: Option<u64>,
    ) -> StoreFuture<'a, Outcome> {
        Box::pin(again::<D, _, _, _>(move || {
            write::<D>(ctx, new_stock, fence)
        }))
    }

    fn bought<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let held: Option<(i64,)> = Stmt::<D>::new(D::SQL.bought)
                .bind(ctx.product.id)
                .bind(ctx.product.epoch)
                .bind(&ctx.order.user_id)
                .optional(&mut *connect::<D>(ctx.backends).await?)
                .await?;
            Ok(held.map_or(0, |(held,)| held))
        })
    }

    /// A sale inserts its order in its own transaction, into its
    /// database's `orders`: that is the one place to look.
    fn find_order<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        _product: &'a Product,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Order>> {
        Box::pin(find_order::<D>(backends, order_id))
    }

    fn release<'a>(
        &'a self,
        backends: &'a Backends,
        _redis: &'a mut RedisConn,
        product: &'a Product,
        due: u32,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let conn = &mut *connect::<D>(backends).await?;
            D::release(product, due).run(conn).await?;
            Ok(())
        })
    }

    fn waves_held<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
    ) -> StoreFuture<'a, Vec<u32>> {
        Box::pin(async move {
            let held: Option<(i32,)> = Stmt::<D>::new(D::SQL.waves_held)
                .bind(product.id)
                .optional(&mut *connect::<D>(backends).await?)
                .await?;
            Ok(vec![held.map_or(1, |(held,)| held).max(1) as u32])
        })
    }

    fn orders<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)> {
        D::orders(backends, product, in_stream)
    }

    fn mark<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Mark> {
        Box::pin(async move {
            let row: Option<(i64, i64)> = Stmt::<D>::new(D::SQL.mark)
                .bind(product.id)
                .optional(&mut *connect::<D>(backends).await?)
                .await?;
            let (remaining, moves) = row.unwrap_or_default();
            Ok(Mark { remaining, moves })
        })
    }

    fn lay_out<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        D::lay_out(backends, product, stale)
    }
}

/// The order `order_id` in dialect `D`'s `orders`.
pub async fn find_order<D: Dialect>(
    backends: &Backends,
    order_id: Uuid,
) -> Result<Option<Order>, BackendError> {
    let stored: Option<OrderRow> = Stmt::<D>::new(D::SQL.find_order)
        .bind(order_id)
        .optional(&mut *connect::<D>(backends).await?)
        .await?;
    Ok(stored.map(Order::from))
}

/// The product's stock; with a fencing token, records it as the newest
/// that has touched the row, in the same statement that reads.
async fn read<D: Dialect>(ctx: &BuyCtx<'_>, fence: Option<u64>) -> Result<i64, BackendError> {
    let product = ctx.product;
    let conn = &mut *connect::<D>(ctx.backends).await?;
    let stock = match fence {
        None => {
            let stock: Option<(i64,)> = Stmt::<D>::new(D::SQL.read)
                .bind(product.id)
                .bind(product.epoch)
                .optional(conn)
                .await?;
            stock.map(|(stock,)| stock)
        }
        Some(token) => {
            Stmt::<D>::new(D::SQL.fence)
                .bind(token as i64)
                .bind(product.id)
                .bind(product.epoch)
                .returning(conn)
                .await?
        }
    };
    Ok(stock.unwrap_or(0))
}

/// Writes `new_stock`, counts the unit against the buyer's limit and
/// inserts the order in one transaction; refused when the product was
/// reset, a newer fencing token touched the row, or the buyer is at the
/// limit. Run again when InnoDB rolled it back (writers a broken lock lets
/// in together can deadlock on the row and the buyer counts).
async fn write<D: Dialect>(
    ctx: &BuyCtx<'_>,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Outcome, BackendError> {
    let product = ctx.product;
    let mut tx = D::pool(ctx.backends)?.begin().await?;
    let fence = fence.map(|t| t as i64);
    let updated = Stmt::<D>::new(D::SQL.write)
        .bind(new_stock)
        .bind(product.id)
        .bind(product.epoch)
        .bind(fence)
        .bind(fence)
        .run(&mut tx)
        .await?;
    if updated == 0 {
        let same_epoch: Option<(i64,)> = Stmt::<D>::new(D::SQL.read)
            .bind(product.id)
            .bind(product.epoch)
            .optional(&mut tx)
            .await?;
        return Ok(match same_epoch {
            Some(_) => Outcome::Fenced,
            None => Outcome::Reset,
        });
    }
    if !D::claim(&mut tx, ctx).await? {
        // Dropping the transaction rolls the stock write back.
        return Ok(Outcome::LimitReached);
    }
    record::<D>(tx, ctx, new_stock).await
}

/// Puts the units of `orders` back in the row, in one transaction with
/// their buyers' counts and, `once`, with each order's `expired →
/// returned` (only the orders this call marks go back: no unit goes back
/// twice). One update of the product's row however many go back: a reaper
/// behind a busy sale costs the hot row one write per pass. The version
/// moves too, so an optimistic writer that read before it retries. How
/// many went back.
async fn restock<D: Dialect>(
    ctx: &BuyCtx<'_>,
    orders: &[Order],
    once: bool,
) -> Result<usize, BackendError> {
    let product = ctx.product;
    let mut tx = D::pool(ctx.backends)?.begin().await?;
    let buyers: Vec<String> = match once {
        true => D::mark_returned(&mut tx, orders).await?,
        false => orders.iter().map(|o| o.user_id.clone()).collect(),
    };
    if buyers.is_empty() {
        return Ok(0);
    }
    let back = Stmt::<D>::new(D::SQL.put_back)
        .bind(buyers.len() as i64)
        .bind(product.id)
        .bind(product.epoch)
        .run(&mut tx)
        .await?;
    if back == 0 {
        return Ok(0);
    }
    if product.settings.per_user_limit > 0 {
        D::uncount(&mut tx, product, &buyers).await?;
    }
    tx.commit().await?;
    Ok(buyers.len())
}

/// Adds `addition`'s units to the row and records the addition, in one
/// transaction: the row's write first (it finds the reset, and takes the
/// row lock every sale queues on), then the record, whose key makes a
/// second addition with the same id roll the whole step back.
async fn add<D: Dialect>(ctx: &BuyCtx<'_>, addition: Addition) -> Result<Added, BackendError> {
    let product = ctx.product;
    let mut tx = D::pool(ctx.backends)?.begin().await?;
    let put = Stmt::<D>::new(D::SQL.put_back)
        .bind(addition.units)
        .bind(product.id)
        .bind(product.epoch)
        .run(&mut tx)
        .await?;
    if put == 0 {
        return Ok(Added::Reset);
    }
    let recorded = Stmt::<D>::new(D::SQL.add)
        .bind(product.id)
        .bind(product.epoch)
        .bind(addition.id)
        .bind(addition.units)
        .run(&mut tx)
        .await?;
    if recorded == 0 {
        // Dropping the transaction takes the units back out.
        return Ok(Added::Before);
    }
    tx.commit().await?;
    Ok(Added::Now)
}
