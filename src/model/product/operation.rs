//! What an admin may change of a live sale without a reset, as request
//! bodies: units added (`POST /admin/products/{id}/restock`), the sale
//! paused, resumed or closed (`POST /admin/products/{id}/window`). A reset
//! starts the sale over (a new epoch, its orders gone); these keep every
//! order and move only what they name.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{MAX_STOCK, whole_number};
use crate::model::error::Invalid;

/// The body of `POST /admin/products/{id}/restock`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RestockRequest {
    /// Units to add to the live sale.
    #[schema(minimum = 1, maximum = 1_000_000_000)]
    #[serde(deserialize_with = "whole_number")]
    pub units: i64,
    /// Names this addition, so a retry after a timeout adds nothing
    /// twice: the same id within one reset adds its units once. Omitted:
    /// a fresh id (then a retry is a new addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addition_id: Option<Uuid>,
}

impl RestockRequest {
    /// Checks the units' range.
    pub fn validate(&self) -> Result<(), Invalid> {
        match (1..=MAX_STOCK).contains(&self.units) {
            true => Ok(()),
            false => Err(Invalid(format!(
                "units must be between 1 and {MAX_STOCK}, got {}",
                self.units
            ))),
        }
    }
}

/// What `POST /admin/products/{id}/window` does to the sale window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum WindowAction {
    /// Stops taking buys (403 `not_started`) until resumed; orders,
    /// holds and stock stay as they are.
    Pause,
    /// Takes buys again, inside the window.
    Resume,
    /// Ends the sale now, on the shared clock (410 `ended` from then):
    /// for good, as a `closes_at_ms` reached; held orders may still be paid.
    Close,
}

impl WindowAction {
    /// The action's name, as sent and logged.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Close => "close",
        }
    }
}

/// The body of `POST /admin/products/{id}/window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowRequest {
    /// What to do.
    pub action: WindowAction,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_whole_and_in_range() {
        let parse = |body: &str| serde_json::from_str::<RestockRequest>(body);
        assert_eq!(parse(r#"{"units": 5.0}"#).unwrap().units, 5);
        assert!(parse(r#"{"units": 5.5}"#).is_err());
        assert!(parse(r#"{"units": 1, "stock": 2}"#).is_err());
        for bad in [0, -1, MAX_STOCK + 1] {
            let request = RestockRequest {
                units: bad,
                addition_id: None,
            };
            assert!(request.validate().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn a_window_action_is_one_of_three() {
        let parse = |body: &str| serde_json::from_str::<WindowRequest>(body);
        assert_eq!(
            parse(r#"{"action": "pause"}"#).unwrap().action,
            WindowAction::Pause
        );
        assert!(parse(r#"{"action": "Pause"}"#).is_err());
        assert!(parse(r#"{"action": "open"}"#).is_err());
        assert!(parse(r#"{"action": "close", "at_ms": 1}"#).is_err());
        assert!(parse("{}").is_err());
    }
}
