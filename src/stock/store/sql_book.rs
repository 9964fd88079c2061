//! A database's `orders` as a [`Book`] of order states (PostgreSQL's, or
//! MySQL's for the products stored there), once for both databases; the
//! steps whose SQL differs in shape — a list bound as an array or as
//! `IN (?, …)`, an `UPDATE` that returns its rows or a locking read
//! before it — are the [`Dialect`]'s.

use std::marker::PhantomData;

use uuid::Uuid;

use super::dialect::{Dialect, Stmt, again, connect};
use crate::backends::Backends;
use crate::model::order::Order;
use crate::model::order::state::{OrderRow, Tally, TallyRow, Tracked, TrackedRow, column};
use crate::model::product::Product;
use crate::model::seam::{Book, Due, StoreFuture};

/// The order states in dialect `D`'s database.
pub struct SqlBook<D>(pub PhantomData<fn() -> D>);

impl<D: Dialect> Book for SqlBook<D> {
    /// Nothing without the database: an instance without MySQL has no
    /// MySQL-stored orders to find.
    fn find<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Tracked>> {
        Box::pin(async move {
            let Some(pool) = D::configured(backends) else {
                return Ok(None);
            };
            let row: Option<TrackedRow> = Stmt::<D>::new(D::SQL.find)
                .bind(order_id)
                .optional(&mut *pool.acquire().await?)
                .await?;
            Ok(row.map(Tracked::from))
        })
    }

    fn pay<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
        payable_from: Option<Uuid>,
        now_ms: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let paid = Stmt::<D>::new(D::SQL.pay)
                .bind(column::PAID)
                .bind(now_ms)
                .bind(order_id)
                .bind(payable_from)
                .bind(payable_from)
                .run(&mut *connect::<D>(backends).await?)
                .await?;
            Ok(paid == 1)
        })
    }

    fn expire<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
    ) -> StoreFuture<'a, Vec<Uuid>> {
        Box::pin(async move {
            if order_ids.is_empty() {
                return Ok(Vec::new());
            }
            again::<D, _, _, _>(|| D::expire(backends, order_ids)).await
        })
    }

    fn returned<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if order_ids.is_empty() {
                return Ok(());
            }
            D::returned(backends, order_ids, blindly).await
        })
    }

    fn due<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        due: Due,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(async move {
            let (state, cutoff) = match due {
                Due::Overdue(cutoff) => (None, Some(cutoff)),
                Due::Owed => (Some(column::EXPIRED), None),
            };
            let rows: Vec<OrderRow> = Stmt::<D>::new(D::SQL.due)
                .bind(product.id)
                .bind(product.epoch)
                .bind(state)
                .bind(cutoff)
                .bind(cutoff)
                .bind(limit)
                .all(&mut *connect::<D>(backends).await?)
                .await?;
            Ok(rows.into_iter().map(Order::from).collect())
        })
    }

    fn claim<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>> {
        Box::pin(again::<D, _, _, _>(move || {
            D::claim_due(backends, product, cutoff, limit)
        }))
    }

    fn tally<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Tally> {
        Box::pin(async move {
            let counts: TallyRow = Stmt::<D>::new(D::SQL.tally)
                .bind(column::EXPIRED)
                .bind(column::RETURNED)
                .bind(column::RETURNED)
                .bind(column::EXPIRED)
                .bind(column::RETURNED)
                .bind(product.id)
                .bind(product.epoch)
                .optional(&mut *connect::<D>(backends).await?)
                .await?
                .ok_or(sqlx::Error::RowNotFound)?;
            Ok(Tally::from(counts))
        })
    }
}
