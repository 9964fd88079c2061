//! Stock stores: where a product's stock and orders live, one file per
//! store behind the seam [`crate::model::seam::Store`] — Redis counters
//! ([`redis_store`]), PostgreSQL's row ([`pg_store`]), MySQL's row
//! ([`mysql_store`]) — and each database's statements for the strategies
//! that sell with SQL ([`pg_rows`], [`mysql_rows`], behind
//! [`crate::model::seam::Rows`]).
//!
//! Everything that differs by where the stock is lives behind the seam:
//! the critical section's read and write, the buyer's count, finding an
//! order (idempotency's replay), releasing a wave, the ledger's figures,
//! the footprint and the reset's part. A product's store is resolved once
//! per reset ([`registry::open`], through its strategy) and carried in
//! every [`crate::model::seam::BuyCtx`], so no layer above asks which store it
//! has. Adding a store is one file here and one arm of
//! [`registry::open`].
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

pub mod innodb;
pub mod mysql_book;
pub mod mysql_rows;
pub mod mysql_store;
pub mod pg_book;
pub mod pg_rows;
pub mod pg_store;
pub mod redis_store;
pub mod registry;
pub mod script;
