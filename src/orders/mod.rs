//! Orders after the sale: the writer that moves Redis-sold orders into
//! PostgreSQL, the ledger that counts them, and an order's life (holds
//! paid, cancelled or given back, and the reconciliation of a counter
//! against the orders).
//!
//! Rule: uses [`crate::model::seam`], [`crate::stock`], [`crate::model`] and
//! [`crate::backends`].

pub mod ledger;
pub mod life;
pub mod writer;
