//! Stock stores: where a product's stock and orders live, behind the seam
//! [`crate::model::seam::Store`] — Redis counters ([`redis_store`]), or a
//! database's `products` row ([`sql_store`]). The SQL store is written
//! once for PostgreSQL and MySQL: its flows, the database strategies'
//! ([`sql_rows`], behind [`crate::model::seam::Rows`]) and the order
//! book's ([`sql_book`]) are generic over a [`dialect::Dialect`] —
//! [`postgres`] or [`mysql`] (with [`innodb`]'s multi-statement steps) —
//! which holds each database's statements and the few steps its SQL says
//! its own way, so a fix to one database's flow is a fix to both.
//!
//! Everything that differs by where the stock is lives behind the seam:
//! the critical section's read and write, the buyer's count, finding an
//! order (idempotency's replay), releasing a wave, the ledger's figures,
//! the footprint and the reset's part. A product's store is resolved once
//! per reset ([`registry::open`], through its strategy) and carried in
//! every [`crate::model::seam::BuyCtx`], so no layer above asks which store it
//! has. Adding a store is one file here (or, for another SQL database, one
//! dialect) and one arm of [`registry::open`].
//!
//! The read and the write are separate on purpose: between them lies the
//! critical section that a lock must protect. Without a (working) lock two
//! buyers read the same value and both write `value - 1`: a lost update,
//! and one more order than the stock allowed.
//!
//! Every store honours a fencing token when the lock hands one over: a
//! read records the token as the newest that has touched the stock, and a
//! write carrying an older token is refused. Recording at the read (not
//! only at the write) matters: otherwise a stale holder that wakes up and
//! writes *before* the new holder writes would still let both sell from
//! one read.

pub mod dialect;
pub mod innodb;
pub mod mysql;
pub mod postgres;
pub mod redis_store;
pub mod registry;
pub mod script;
pub mod sql_book;
pub mod sql_rows;
pub mod sql_store;
