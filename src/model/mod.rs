//! The vocabulary every other area reads: products and their settings,
//! what the catalogue says of a strategy, orders, the seam between selling
//! and storing, the errors and the status table, the metric names and the
//! retry pacing.
//!
//! Rule: uses only [`crate::backends`] (an error classifies a backend's
//! failure; the seam's `BuyCtx` carries the handles).

pub mod backoff;
pub mod error;
pub mod info;
pub mod order;
pub mod product;
pub mod seam;
pub mod telemetry;
