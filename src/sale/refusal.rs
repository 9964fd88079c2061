//! Why a purchase did not sell: the domain's refusals, each with what the
//! buyer may do next. Not errors — a sold-out product answers as it
//! should — except [`Refusal::Failed`], a backend's failure before
//! anything could have sold.

use std::time::Duration;

use uuid::Uuid;

use crate::backends::failure::BackendError;
use crate::sale::live::Answer;

/// A purchase that did not sell.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// No product with that id has been created.
    #[error("unknown product {0}")]
    UnknownProduct(i64),
    /// The sale window has not opened yet.
    #[error("the sale has not opened yet")]
    NotStarted {
        /// How long until it opens.
        starts_in: Duration,
        /// When it opens (ms since the Unix epoch).
        opens_at_ms: u64,
    },
    /// The sale window has closed.
    #[error("the sale has ended")]
    Ended,
    /// The product sells only to buyers holding a reservation for this
    /// reset, and this one holds none.
    #[error("no reservation")]
    NotReserved,
    /// The product sells only on a hidden path, and this buy came on its
    /// plain path or on a path that is not valid for it: why.
    #[error("{0}")]
    BadPath(&'static str),
    /// No stock left.
    #[error("sold out")]
    SoldOut,
    /// This wave's stock is gone; another goes on sale later.
    #[error("sold out until the next wave")]
    SoldOutUntil {
        /// How long until the next wave.
        next_in: Duration,
        /// When it opens (ms since the Unix epoch).
        next_at_ms: u64,
    },
    /// The buyer holds `per_user_limit` units already.
    #[error("limit reached")]
    LimitReached,
    /// Nothing was sold and the buyer may try again after `retry_after`:
    /// a lock not acquired in time, retries run out, a reset mid-buy, or
    /// another request with the same Idempotency-Key not settled yet.
    #[error("{reason}")]
    Busy {
        /// Why.
        reason: &'static str,
        /// The retry hint.
        retry_after: Duration,
    },
    /// The sale was sent and not answered: it may or may not have
    /// happened. The one form of "outcome unknown" a buyer is told: the
    /// order it would have recorded is named, and a retry with the same
    /// Idempotency-Key learns which.
    #[error("outcome unknown for order {order_id}: {cause}")]
    OutcomeUnknown {
        /// The order the sale would have recorded.
        order_id: Uuid,
        /// What went wrong.
        cause: String,
    },
    /// A backend failed before anything could have sold.
    #[error(transparent)]
    Failed(#[from] BackendError),
}

impl Refusal {
    /// A `busy` refusal with a one-second retry hint.
    pub fn busy(reason: &'static str) -> Self {
        Self::Busy {
            reason,
            retry_after: Duration::from_secs(1),
        }
    }

    /// What the live view counts this answer as; `None` for a product the
    /// service does not know (nothing to count it against).
    pub fn kind(&self) -> Option<Answer> {
        Some(match self {
            Self::UnknownProduct(_) => return None,
            Self::SoldOut | Self::SoldOutUntil { .. } => Answer::SoldOut,
            Self::Busy { .. } => Answer::Busy,
            Self::LimitReached => Answer::LimitReached,
            Self::OutcomeUnknown { .. } => Answer::Unknown,
            Self::NotStarted { .. } | Self::Ended | Self::NotReserved | Self::BadPath(_) => {
                Answer::Refused
            }
            Self::Failed(_) => Answer::Error,
        })
    }
}
