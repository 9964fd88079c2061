//! seckill: a flash-sale inventory backend and a laboratory of the ways to
//! protect a hot stock counter.
//!
//! Map of the crate:
//! - [`serve`]: one instance (pools, migrations, order writer, HTTP server);
//!   [`http`] its routes; [`edge`] its rate limits and overload
//!   protection; [`error`] the status table in one place.
//! - [`strategy`]: the ways to sell a unit, chosen per product from a
//!   registry; [`lock`] the locks the locked strategies compose with the
//!   shared critical section; [`store`] the Redis stock store.
//! - [`catalog`]: products (load on the buy path, reset everywhere);
//!   [`product`] their types and key names.
//! - [`orders`]: what a sale records, and the writer that moves Redis-sold
//!   orders into PostgreSQL; [`ledger`] counts them honestly.
//! - [`lab`]: the whole topology natively, for users and tests alike;
//!   [`race`] the load driver and the comparison.
//! - [`soldout`]: the local sold-out flag, cleared on every instance by a
//!   reset.

pub mod backoff;
pub mod catalog;
pub mod cli;
pub mod edge;
pub mod error;
pub mod http;
pub mod idempotency;
pub mod lab;
pub mod ledger;
pub mod limit;
pub mod lock;
pub mod orders;
pub mod product;
pub mod race;
pub mod report;
pub mod serve;
pub mod soldout;
pub mod store;
pub mod strategy;
pub mod telemetry;
