//! Products: their id, strategy, settings and reset generation — the
//! ground every other layer stands on. Nothing here knows how a product is
//! sold or stored.

pub mod keys;
mod settings;

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
pub use settings::{Quorum, Settings, StoreKind};

/// Largest stock a reset accepts; far above any flash sale, far below
/// anything that could overflow a counter.
pub const MAX_STOCK: i64 = 1_000_000_000;

/// A product id from a URL path: 1 ..= i64::MAX (PostgreSQL's BIGINT).
///
/// Parsed by hand rather than by axum's `Path<i64>` so that every malformed
/// id (`0`, `-1`, `2^64`, `abc`) gets the contract's `bad_request` body.
pub fn parse_id(raw: &str) -> Result<i64, Invalid> {
    match raw.parse::<i64>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(Invalid(format!(
            "product id must be an integer from 1 to {}, got {:?}",
            i64::MAX,
            truncate(raw, 40)
        ))),
    }
}

/// Shortens text quoted back in an error message.
pub fn truncate(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// A product as every instance sees it on the buy path (cached in Redis,
/// authoritative in PostgreSQL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Product {
    /// The product id (1 ..= i64::MAX).
    pub id: i64,
    /// The catalogue id of the strategy that sells it.
    pub strategy: String,
    /// The strategy's knobs.
    pub settings: Settings,
    /// Stock set by the last reset.
    pub initial: i64,
    /// Reset generation: orders carry it, so only this reset's orders count.
    pub epoch: i64,
}

/// The body of `PUT /admin/products/{id}`: what a reset asks for. Also what
/// the race driver sends, so both sides share one typed shape.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Units on sale after the reset.
    pub stock: i64,
    /// Strategy id from the catalogue.
    pub strategy: String,
    /// The strategy's knobs; omitted ones take their defaults.
    #[serde(flatten)]
    pub settings: Settings,
}

impl ResetRequest {
    /// Checks the stock and the settings' ranges (the strategy id is the
    /// catalogue's to check).
    pub fn validate(&self) -> Result<(), Invalid> {
        if !(0..=MAX_STOCK).contains(&self.stock) {
            return Err(Invalid(format!(
                "stock must be between 0 and {MAX_STOCK}, got {}",
                self.stock
            )));
        }
        self.settings.validate()
    }
}
