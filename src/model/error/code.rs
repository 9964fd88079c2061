//! The contract's error codes: one enum, which the failure body carries,
//! the OpenAPI document lists (its schema is derived from it), the status
//! table in docs/http.md is generated from (`seckill errors`), and the
//! gateway's own error pages are held to. A code the service answers is a
//! variant, so there is no list to keep in step by hand.

use axum::http::StatusCode;
use serde::Serialize;
use utoipa::ToSchema;

/// What a program acts on in a failure body (`error.code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A malformed id, buyer, header or body.
    BadRequest,
    /// No admin token.
    Unauthorized,
    /// A wrong admin token.
    Forbidden,
    /// The sale window has not opened.
    NotStarted,
    /// A pre-booked product, and no reservation.
    NotReserved,
    /// A product with a hidden path, bought without a valid one.
    BadPath,
    /// No such product.
    UnknownProduct,
    /// No such order (or one voided by its product's reset).
    UnknownOrder,
    /// Another buyer's order.
    NotYourOrder,
    /// No such route.
    NotFound,
    /// The route exists with another method.
    MethodNotAllowed,
    /// The sale window has closed.
    Ended,
    /// No stock left (now, or until the next wave).
    SoldOut,
    /// The buyer holds its per-user limit.
    LimitReached,
    /// The hold expired or was cancelled: nothing was paid.
    Expired,
    /// The order is not a hold: sold outright, or already paid.
    NotHeld,
    /// No reservation can be made.
    NotReservable,
    /// The product sells on its plain path: it hands out no other.
    NoPath,
    /// A token bucket is empty.
    RateLimited,
    /// Nothing happened; retry.
    Busy,
    /// A backend was down, or refused, before anything ran.
    Unavailable,
    /// The sale may have happened.
    OutcomeUnknown,
    /// `GET /readyz`: a backend does not answer.
    NotReady,
    /// Any other failure.
    Backend,
}

impl ErrorCode {
    /// Every code, in the order the status table lists them.
    pub const ALL: [Self; 24] = [
        Self::BadRequest,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotStarted,
        Self::NotReserved,
        Self::BadPath,
        Self::UnknownProduct,
        Self::UnknownOrder,
        Self::NotYourOrder,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::Ended,
        Self::SoldOut,
        Self::LimitReached,
        Self::Expired,
        Self::NotHeld,
        Self::NotReservable,
        Self::NoPath,
        Self::RateLimited,
        Self::Busy,
        Self::Unavailable,
        Self::OutcomeUnknown,
        Self::NotReady,
        Self::Backend,
    ];

    /// Its name in the body (`sold_out`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotStarted => "not_started",
            Self::NotReserved => "not_reserved",
            Self::BadPath => "bad_path",
            Self::UnknownProduct => "unknown_product",
            Self::UnknownOrder => "unknown_order",
            Self::NotYourOrder => "not_your_order",
            Self::Expired => "expired",
            Self::NotHeld => "not_held",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Ended => "ended",
            Self::SoldOut => "sold_out",
            Self::LimitReached => "limit_reached",
            Self::NotReservable => "not_reservable",
            Self::NoPath => "no_path",
            Self::RateLimited => "rate_limited",
            Self::Busy => "busy",
            Self::Unavailable => "unavailable",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::NotReady => "not_ready",
            Self::Backend => "backend",
        }
    }

    /// The status the service answers it with.
    pub fn status(self) -> StatusCode {
        match self {
            Self::BadRequest => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden
            | Self::NotStarted
            | Self::NotReserved
            | Self::BadPath
            | Self::NotYourOrder => StatusCode::FORBIDDEN,
            Self::UnknownProduct | Self::UnknownOrder | Self::NotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Ended => StatusCode::GONE,
            Self::SoldOut
            | Self::LimitReached
            | Self::NotReservable
            | Self::NoPath
            | Self::Expired
            | Self::NotHeld => StatusCode::CONFLICT,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::Busy | Self::Unavailable | Self::OutcomeUnknown | Self::NotReady => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Backend => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What it tells a client, for the status table.
    pub fn means(self) -> &'static str {
        match self {
            Self::BadRequest => "a malformed id (ids are 1..2^63−1), buyer, header or body",
            Self::Unauthorized => {
                "an admin route without a bearer token; with `buyer_auth = token`, a buyer route \
                 without a valid buyer token (missing, malformed, forged, expired, not yet valid, \
                 another algorithm or audience)"
            }
            Self::Forbidden => "a wrong admin token",
            Self::NotStarted => {
                "the sale window opens in `seconds_left` s (also `Retry-After`), at `opens_at_ms`; \
                 without them, the sale is paused (`Retry-After: 1`)"
            }
            Self::NotReserved => {
                "a pre-booked product, and no reservation of this buyer's on this reset"
            }
            Self::BadPath => {
                "a product with `hidden_path` bought on its plain path, or on a path that is not this \
                 buyer's for this product and reset, has expired, or was used: nothing sold"
            }
            Self::UnknownProduct => "no product with that id was ever reset",
            Self::UnknownOrder => {
                "no order with that id (an order of a product reset since is void)"
            }
            Self::NotYourOrder => "the order is another buyer's: nothing changed",
            Self::Expired => {
                "the hold expired (or was cancelled) and its unit went back on sale: nothing was paid"
            }
            Self::NotHeld => "the order is not a hold: sold outright, or already paid",
            Self::NotFound => "no such route",
            Self::MethodNotAllowed => "the route takes another method",
            Self::Ended => "the sale window has closed",
            Self::SoldOut => {
                "no stock left; between waves with `seconds_left`, `opens_at_ms` and `Retry-After` for the next"
            }
            Self::LimitReached => "the buyer holds the product's `per_user_limit`",
            Self::NotReservable => "the product takes no reservations, or its sale has opened",
            Self::NoPath => "the product has no hidden path: it sells on `POST /stock/{id}/buy`",
            Self::RateLimited => {
                "a token bucket is empty: `Retry-After`, `X-Limited-By: gateway`, `service` (the \
                 address's) or `buyer` (the buyer's)"
            }
            Self::Busy => {
                "nothing was sold: lock not acquired in time, retries exhausted, a reset mid-buy, overloaded, over its path's adaptive limit or behind its open circuit breaker, a key still pending; retry after `Retry-After`"
            }
            Self::Unavailable => {
                "a backend could not be reached, or refused before anything ran (OOM, MISCONF, LOADING, BUSY, READONLY, a cluster's redirects): nothing was sold"
            }
            Self::OutcomeUnknown => {
                "the step that sells was sent and not answered: the sale may have happened; `order_id` names the order it would have recorded; retry with the same `Idempotency-Key` to learn which"
            }
            Self::NotReady => "`GET /readyz`: Redis or PostgreSQL does not answer",
            Self::Backend => "any other failure, never with a partial sale",
        }
    }

    /// The code called `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_serializes_as_its_name_once() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).expect("serializes");
            assert_eq!(json, serde_json::json!(code.as_str()));
            assert_eq!(ErrorCode::named(code.as_str()), Some(code));
        }
        let mut names: Vec<_> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len());
    }

    #[test]
    fn the_gateway_error_pages_use_the_contracts_codes() {
        let template = include_str!("../../../nginx/seckill.conf.template");
        let pages: Vec<(u16, &str)> = template
            .split("return ")
            .skip(1)
            .filter_map(|rest| {
                let status = rest.split(' ').next()?.parse().ok()?;
                let code = rest.split(r#""code":""#).nth(1)?.split('"').next()?;
                rest.starts_with(|c: char| c.is_ascii_digit())
                    .then_some((status, code))
            })
            .collect();
        assert!(!pages.is_empty(), "no error pages found in the template");
        for (status, name) in pages {
            let code = ErrorCode::named(name)
                .unwrap_or_else(|| panic!("the gateway answers {name}, not a contract code"));
            // The gateway's own statuses for a code: its 413/414 are bad
            // requests, its 502/504 an unknown outcome (an instance that
            // died or timed out after it passed a buy on may have sold).
            let allowed: &[u16] = match code {
                ErrorCode::BadRequest => &[400, 413, 414],
                ErrorCode::OutcomeUnknown => &[502, 504],
                other => &[other.status().as_u16()],
            };
            assert!(
                allowed.contains(&status),
                "the gateway answers {name} with {status}"
            );
        }
    }
}
