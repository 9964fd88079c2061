//! Judging a run after the fact: the history checker, which reads only a
//! race's history and the ledger (Jepsen's checker, kept apart from the
//! driver), and the report that draws a race as an HTML page.
//!
//! Rule: uses [`crate::instance::chart`], [`crate::model::order`] and
//! [`crate::model`]; never the driver.

pub mod check;
pub mod report;
