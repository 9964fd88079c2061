//! One running instance: start-up and shutdown, the HTTP routes and their
//! OpenAPI document, the edge's rate limits and overload answers, who is
//! buying, and the comparison chart the live page and the report draw.
//!
//! Rule: uses every area below it ([`crate::orders`], [`crate::sale`],
//! [`crate::stock`], [`crate::model`], [`crate::backends`]); of the tools
//! above it, the lab starts an instance and the report draws its chart.

pub mod auth;
pub mod chart;
pub mod edge;
pub mod http;
pub mod serve;
