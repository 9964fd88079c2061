//! Products: their id, strategy, settings and reset generation — the
//! ground every other layer stands on. Nothing here knows how a product is
//! sold or stored.

pub mod hold_terms;
pub mod keys;
pub mod operation;
mod settings;
pub mod shares;

use serde::de::{Error as _, Unexpected};
use serde::{Deserialize, Deserializer, Serialize};
use utoipa::ToSchema;

use crate::model::error::Invalid;
pub use settings::{MAX_WAVES, Quorum, Recipe, Settings, StoreKind, Window, now_ms};

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Product {
    /// The product id (1 ..= i64::MAX).
    #[schema(minimum = 1)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Units on sale after the reset.
    #[schema(minimum = 0, maximum = 1_000_000_000)]
    #[serde(deserialize_with = "whole_number")]
    pub stock: i64,
    /// Strategy id from the catalogue (the service's document lists them:
    /// this layer does not know the catalogue).
    pub strategy: String,
    /// The strategy's knobs; omitted ones take their defaults.
    #[serde(flatten)]
    pub settings: Settings,
}

/// Reads an integer as JSON Schema (and so the OpenAPI document) counts
/// integers: `5` and `5.0` alike, `5.5` refused. serde alone refuses
/// `5.0` for an integer field, and with it a body the document calls
/// valid from any client that writes numbers as floats.
fn whole_number<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    let number = serde_json::Number::deserialize(deserializer)?;
    let value = match (number.as_i64(), number.as_u64(), number.as_f64()) {
        (Some(i), _, _) => i128::from(i),
        (_, Some(u), _) => i128::from(u),
        // Within ±2^63 every float is exactly an i128.
        (_, _, Some(f)) if f.fract() == 0.0 && f.abs() <= 2f64.powi(63) => f as i128,
        (_, _, f) => {
            return Err(D::Error::invalid_value(
                Unexpected::Float(f.unwrap_or(f64::NAN)),
                &"a whole number",
            ));
        }
    };
    T::try_from(value).map_err(|_| {
        D::Error::invalid_value(Unexpected::Other(&number.to_string()), &"a number in range")
    })
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use utoipa::PartialSchema;

    use super::*;

    /// `(name, minimum, maximum)` of every bounded property in `T`'s schema
    /// (a flattened struct's properties sit under `allOf`).
    fn bounds<T: PartialSchema>() -> Vec<(String, i64, Option<i64>)> {
        let schema = serde_json::to_value(T::schema()).expect("a schema serializes");
        let parts = match schema["allOf"].as_array() {
            Some(parts) => parts.clone(),
            None => vec![schema],
        };
        let number = |v: &Value| v.as_f64().map(|n| n as i64);
        parts
            .iter()
            .filter_map(|part| part["properties"].as_object())
            .flatten()
            .filter_map(|(name, p)| {
                Some((name.clone(), number(&p["minimum"])?, number(&p["maximum"])))
            })
            .collect()
    }

    /// Whether a reset body with `field` set to `value` is accepted.
    fn accepted(field: &str, value: i64) -> bool {
        let mut body = json!({"stock": 1, "strategy": "naive"});
        body[field] = json!(value);
        serde_json::from_value::<ResetRequest>(body).is_ok_and(|r| r.validate().is_ok())
    }

    /// The document promises exactly the ranges the validator enforces, so
    /// a client generating bodies from it is neither refused valid ones nor
    /// let through invalid ones.
    #[test]
    fn integers_may_be_written_as_floats_with_no_fraction() {
        let body = json!({"stock": 5.0, "strategy": "naive", "work_ms": 1e3, "segments": 2.0});
        let request: ResetRequest = serde_json::from_value(body).expect("whole floats accepted");
        assert_eq!(request.stock, 5);
        assert_eq!(request.settings.work_ms, 1_000);
        assert_eq!(request.settings.segments, 2);
        for bad in [json!(5.5), json!(-1.0), json!(1e30), json!("5")] {
            let body = json!({"stock": 1, "strategy": "naive", "work_ms": bad});
            assert!(
                serde_json::from_value::<ResetRequest>(body).is_err(),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn the_sale_window_opens_and_closes_at_its_moments() {
        let window = Settings {
            opens_at_ms: 1_000,
            closes_at_ms: 5_000,
            ..Settings::default()
        };
        assert_eq!(window.window(0), Window::NotStarted(1_000));
        assert_eq!(window.window(999), Window::NotStarted(1));
        assert_eq!(window.window(1_000), Window::Open);
        assert_eq!(window.window(4_999), Window::Open);
        assert_eq!(window.window(5_000), Window::Ended);
        assert_eq!(Settings::default().window(u64::MAX), Window::Open);
        assert!(window.validate().is_ok());
        let backwards = Settings {
            opens_at_ms: 5_000,
            closes_at_ms: 5_000,
            ..Settings::default()
        };
        assert!(backwards.validate().is_err());
    }

    #[test]
    fn a_paused_sale_is_paused_until_it_closes() {
        let paused = Settings {
            opens_at_ms: 1_000,
            closes_at_ms: 5_000,
            paused: true,
            ..Settings::default()
        };
        assert_eq!(
            paused.window(0),
            Window::Paused,
            "the opening will not open it"
        );
        assert_eq!(paused.window(2_000), Window::Paused);
        assert_eq!(paused.window(5_000), Window::Ended);
        assert!(paused.reservable(999), "reservations before the opening");
        assert!(!paused.reservable(1_000));
        let refused = paused.admits(2_000).expect_err("a paused sale sells");
        assert_eq!(refused.code(), crate::model::error::ErrorCode::NotStarted);
    }

    #[test]
    fn waves_come_due_one_interval_apart_from_the_opening() {
        let waves = Settings {
            opens_at_ms: 1_000,
            waves: 3,
            wave_every_ms: 500,
            ..Settings::default()
        };
        let due: Vec<u32> = [0, 999, 1_000, 1_499, 1_500, 2_000, 9_999]
            .into_iter()
            .map(|t| waves.waves_due(t))
            .collect();
        assert_eq!(due, [0, 0, 1, 1, 2, 3, 3]);
        assert_eq!(waves.wave_opens_at(1), 1_000);
        assert_eq!(waves.wave_opens_at(3), 2_000);
        assert_eq!(Settings::default().waves_due(5), 1);
        let at_once = Settings {
            waves: 4,
            ..Settings::default()
        };
        assert_eq!(
            at_once.waves_due(0),
            4,
            "no interval: every wave at the opening"
        );
    }

    #[test]
    fn the_schema_bounds_are_the_validated_ones() {
        let fields: Vec<_> = bounds::<Settings>()
            .into_iter()
            .chain(bounds::<ResetRequest>())
            .collect();
        let names: Vec<&str> = fields.iter().map(|(n, ..)| n.as_str()).collect();
        for expected in ["stock", "work_ms", "lease_ms", "segments", "per_user_limit"] {
            assert!(
                names.contains(&expected),
                "{expected} has no bounds: {names:?}"
            );
        }
        for (name, min, max) in fields {
            let max = max.unwrap_or_else(|| panic!("{name} has a minimum but no maximum"));
            assert!(accepted(&name, min), "{name} = {min} (its minimum) refused");
            assert!(!accepted(&name, min - 1), "{name} = {} accepted", min - 1);
            assert!(accepted(&name, max), "{name} = {max} (its maximum) refused");
            assert!(!accepted(&name, max + 1), "{name} = {} accepted", max + 1);
        }
    }
}
