//! How a unit is sold: the locks, the stores that keep the stock (Redis,
//! PostgreSQL, MySQL), the per-buyer limit written in the same atomic step
//! as the stock, and the strategies that compose them.
//!
//! Rule: uses [`crate::model`] and [`crate::backends`]; knows nothing of
//! HTTP, of an instance or of the tools.

pub mod limit;
pub mod lock;
pub mod store;
pub mod strategy;
