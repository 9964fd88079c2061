//! Errors, one enum per layer, and the one place where they become HTTP
//! statuses and the contract's JSON body `{"error":{"code":…,"message":…}}`.

mod code;

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::backends::failure::BackendError;
pub use code::ErrorCode;

/// The header naming the layer that answered 429.
pub const LIMITED_BY: &str = "x-limited-by";

/// `duration` in whole seconds, rounded up, at least 1: what
/// `Retry-After` can say.
fn whole_seconds(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil().max(1.0) as u64
}

/// Input the domain refuses (a malformed id, an out-of-range setting, an
/// unknown strategy): a domain error with the reason, which the HTTP layer
/// answers as 400 `bad_request` (see [`ApiError`]'s `From`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// The instance's bucket that answered a 429 (the gateway's says
/// `gateway` itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limiter {
    /// The bucket per client address (or the global one).
    Service,
    /// The bucket per buyer.
    Buyer,
}

impl Limiter {
    /// `X-Limited-By`'s value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Buyer => "buyer",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Service => "rate limited; retry later",
            Self::Buyer => "this buyer's requests are over its rate; retry later",
        }
    }
}

/// Everything an HTTP handler can answer with besides success.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: a malformed id, buyer, header or body.
    #[error("{0}")]
    BadRequest(String),
    /// 401: an admin route without a bearer token, or a buyer route
    /// without a valid buyer token (`buyer_auth = token`): why.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: a product with a hidden path bought without a valid one: why.
    #[error("{0}")]
    BadPath(&'static str),
    /// 409: the product hands out no hidden path.
    #[error("this product has no hidden path: it sells on POST /stock/{{id}}/buy")]
    NoPath,
    /// 403: the bearer token is not the admin token.
    #[error("wrong admin token")]
    Forbidden,
    /// 403: the product's sale window has not opened yet.
    #[error("the sale opens in {} s", whole_seconds(*.starts_in))]
    NotStarted {
        /// How long until it opens: `seconds_left` in the body, and
        /// `Retry-After`.
        starts_in: Duration,
        /// When it opens (ms since the Unix epoch), for a client that
        /// counts down to the moment rather than to the next second.
        opens_at_ms: u64,
    },
    /// 403 `not_started`: the operator paused the sale. A buyer is told
    /// what it is told before an opening (its client needs nothing new),
    /// without the seconds left: nobody knows when it resumes.
    #[error("the sale is paused; it resumes when its operator resumes it")]
    Paused,
    /// 410: the product's sale window has closed.
    #[error("the sale has ended")]
    Ended,
    /// 403: the product sells only to buyers with a reservation, and this
    /// request carries none for this buyer (missing, forged, another
    /// buyer's, or made before the last reset).
    #[error("this product sells only to buyers holding a reservation (X-Reservation)")]
    NotReserved,
    /// 409: no reservation can be made: the product takes none, or its
    /// sale has opened.
    #[error("{0}")]
    NotReservable(&'static str),
    /// 404: no product with that id has been created.
    #[error("unknown product {0}")]
    UnknownProduct(i64),
    /// 404: no such order.
    #[error("unknown order")]
    UnknownOrder,
    /// 403: the order is another buyer's.
    #[error("this order is another buyer's")]
    NotYourOrder,
    /// 409: the hold expired or was cancelled before this payment.
    #[error("the hold expired: its unit went back on sale and nothing was paid")]
    Expired,
    /// 409: the order is not a hold.
    #[error("the order is not a hold: it is {0}")]
    NotHeld(&'static str),
    /// 404: no route.
    #[error("no such endpoint")]
    NotFound,
    /// 405: the route exists with another method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409: the product has no stock left.
    #[error("sold out")]
    SoldOut,
    /// 409 `sold_out` too: this wave's stock is gone, and another wave
    /// goes on sale later.
    #[error("this wave is sold out; the next opens in {} s", whole_seconds(*.next_in))]
    SoldOutUntil {
        /// How long until the next wave: `seconds_left`, `Retry-After`.
        next_in: Duration,
        /// When it opens (ms since the Unix epoch), as `opens_at_ms`.
        next_at_ms: u64,
    },
    /// 409: the buyer already holds the product's `per_user_limit` units.
    #[error("this buyer has reached the product's per-user limit")]
    LimitReached,
    /// 429: the client's, the buyer's (or everybody's) token bucket is
    /// empty.
    #[error("{}", by.message())]
    RateLimited {
        /// Sent as `Retry-After`.
        retry_after: Duration,
        /// Which bucket: `X-Limited-By`.
        by: Limiter,
    },
    /// 503: the lock was not acquired in time, retries ran out or the
    /// service is shedding load; the client may retry after the hint.
    #[error("{message}")]
    Busy {
        /// Why the request was turned away.
        message: String,
        /// Sent as `Retry-After` (whole seconds, at least 1).
        retry_after: Duration,
    },
    /// 503: the sale was sent and not answered (or the request timed out
    /// while its write may still run); the order it would have recorded
    /// is named, when known, so the buyer (and a history check) can look
    /// for it. Retrying with the same `Idempotency-Key` tells which. The
    /// one form an unknown outcome takes in an answer: a backend's
    /// [`BackendError::OutcomeUnknown`] becomes it.
    #[error("outcome unknown: {cause}")]
    OutcomeUnknown {
        /// The order the sale would have recorded.
        order_id: Option<uuid::Uuid>,
        /// What went wrong, for the log.
        cause: String,
    },
    /// 503 from `/readyz`: a backend is unreachable.
    #[error("not ready: {0}")]
    NotReady(String),
    /// A backend failed before anything could have sold. Logged with its
    /// cause; the client sees an opaque message: 503 `unavailable` when a
    /// backend could not be reached or refused before anything ran, 500
    /// `backend` otherwise.
    #[error(transparent)]
    Backend(BackendError),
}

impl From<BackendError> for ApiError {
    fn from(error: BackendError) -> Self {
        match error {
            BackendError::OutcomeUnknown(cause) => Self::OutcomeUnknown {
                order_id: None,
                cause,
            },
            BackendError::Contended(reason) => Self::busy(&reason),
            error => Self::Backend(error),
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(Invalid(reason): Invalid) -> Self {
        Self::BadRequest(reason)
    }
}

/// An extractor's rejection (a path, query or JSON body that does not
/// parse) is the contract's 400 with axum's own explanation as the
/// message: one conversion, so every handler says `path?` and the body
/// keeps the JSON error shape instead of axum's plain text.
macro_rules! rejection_is_bad_request {
    ($($rejection:ty),*) => {$(
        impl From<$rejection> for ApiError {
            fn from(rejection: $rejection) -> Self {
                Self::BadRequest(rejection.body_text())
            }
        }
    )*};
}
rejection_is_bad_request!(
    axum::extract::rejection::PathRejection,
    axum::extract::rejection::QueryRejection,
    axum::extract::rejection::JsonRejection
);

/// The contract's failure body, `{"error":{"code":…,"message":…}}`: one
/// type for the responses and the OpenAPI document alike.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// What a program acts on.
    code: ErrorCode,
    /// What a person reads; a 500 does not show its cause.
    message: String,
    /// With `outcome_unknown`: the order the sale would have recorded, so
    /// the buyer (or a history check) can look for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    order_id: Option<uuid::Uuid>,
    /// With `not_started`: whole seconds until the sale opens; with
    /// `sold_out` between waves: until the next wave (rounded up, as
    /// `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds_left: Option<u64>,
    /// With `not_started`: the moment the sale opens; with `sold_out`
    /// between waves: the moment the next wave does (ms since the Unix
    /// epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    opens_at_ms: Option<u64>,
}

impl ApiError {
    /// A `busy` answer with a one-second retry hint: nothing was done.
    pub fn busy(reason: &str) -> Self {
        Self::Busy {
            message: reason.to_owned(),
            retry_after: Duration::from_secs(1),
        }
    }

    /// The contract's machine-readable code for this error (its status
    /// is the code's, [`ErrorCode::status`]).
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadRequest(_) => ErrorCode::BadRequest,
            Self::Unauthorized(_) => ErrorCode::Unauthorized,
            Self::Forbidden => ErrorCode::Forbidden,
            Self::BadPath(_) => ErrorCode::BadPath,
            Self::NoPath => ErrorCode::NoPath,
            Self::NotStarted { .. } | Self::Paused => ErrorCode::NotStarted,
            Self::Ended => ErrorCode::Ended,
            Self::NotReserved => ErrorCode::NotReserved,
            Self::NotReservable(_) => ErrorCode::NotReservable,
            Self::UnknownProduct(_) => ErrorCode::UnknownProduct,
            Self::UnknownOrder => ErrorCode::UnknownOrder,
            Self::NotYourOrder => ErrorCode::NotYourOrder,
            Self::Expired => ErrorCode::Expired,
            Self::NotHeld(_) => ErrorCode::NotHeld,
            Self::NotFound => ErrorCode::NotFound,
            Self::MethodNotAllowed => ErrorCode::MethodNotAllowed,
            Self::SoldOut | Self::SoldOutUntil { .. } => ErrorCode::SoldOut,
            Self::LimitReached => ErrorCode::LimitReached,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::Busy { .. } => ErrorCode::Busy,
            Self::NotReady(_) => ErrorCode::NotReady,
            Self::OutcomeUnknown { .. } => ErrorCode::OutcomeUnknown,
            Self::Backend(cause) if cause.is_transport() => ErrorCode::Unavailable,
            Self::Backend(_) => ErrorCode::Backend,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = self.code();
        let status = code.status();
        let message = match &self {
            Self::OutcomeUnknown { .. } => {
                tracing::error!(error = %self, "sale outcome unknown");
                "the sale was sent to a backend that did not answer: it may or may not have \
                 happened; retry with the same Idempotency-Key to learn which"
                    .to_owned()
            }
            Self::Backend(cause) if cause.is_transport() => {
                tracing::warn!(error = %cause, "backend unavailable");
                "a backend is unavailable; nothing was sold; retry later".to_owned()
            }
            Self::Backend(cause) => {
                tracing::error!(error = %cause, "backend failure");
                "a backend failed; nothing was sold".to_owned()
            }
            other => other.to_string(),
        };
        let order_id = match &self {
            Self::OutcomeUnknown { order_id, .. } => *order_id,
            _ => None,
        };
        let (seconds_left, opens_at_ms) = match &self {
            Self::NotStarted {
                starts_in: wait,
                opens_at_ms: at,
            }
            | Self::SoldOutUntil {
                next_in: wait,
                next_at_ms: at,
            } => (Some(whole_seconds(*wait)), Some(*at)),
            _ => (None, None),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code,
                message,
                order_id,
                seconds_left,
                opens_at_ms,
            },
        };
        let mut response = (status, Json(body)).into_response();
        let retry_after = match &self {
            Self::Busy { retry_after, .. }
            | Self::RateLimited { retry_after, .. }
            | Self::NotStarted {
                starts_in: retry_after,
                ..
            }
            | Self::SoldOutUntil {
                next_in: retry_after,
                ..
            } => Some(*retry_after),
            Self::Paused => Some(Duration::from_secs(1)),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(Duration::from_secs(1)),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(whole_seconds(retry_after)),
            );
        }
        if let Self::RateLimited { by, .. } = &self {
            // The gateway's 429 says "gateway": clients and load reports
            // can tell which layer turned them away.
            response
                .headers_mut()
                .insert(LIMITED_BY, HeaderValue::from_static(by.as_str()));
        }
        response
    }
}
