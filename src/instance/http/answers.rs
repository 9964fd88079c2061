//! Failure answers that several routes give in the same words, declared
//! once for the OpenAPI document (each route's own answers stay beside
//! it, in its `#[utoipa::path]`).

use utoipa::IntoResponses;

use crate::model::error::ErrorBody;

/// 500 `backend`.
#[derive(IntoResponses)]
#[response(status = 500, description = "`backend`: a backend failed")]
pub struct BackendFailed(pub ErrorBody);

/// 404 `unknown_product`.
#[derive(IntoResponses)]
#[response(status = 404, description = "`unknown_product`")]
pub struct UnknownProduct(pub ErrorBody);

/// 503 `unavailable`.
#[derive(IntoResponses)]
#[response(status = 503, description = "`unavailable`: a backend is down")]
pub struct Unavailable(pub ErrorBody);

/// 401 on a buyer's route: why a token is refused.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "`unauthorized`: with `buyer_auth = token`, no valid buyer token (missing, malformed, forged, expired, not yet valid, another algorithm or audience)"
)]
pub struct BuyerUnauthorized(pub ErrorBody);

/// 429 from the buyer's own bucket (a route the gateway does not limit
/// apart).
#[derive(IntoResponses)]
#[response(
    status = 429,
    description = "`rate_limited`: the buyer's bucket is empty (`X-Limited-By: buyer`)",
    headers(
        ("Retry-After" = u64, description = "seconds"),
        ("X-Limited-By" = String, description = "`buyer`"),
    )
)]
pub struct BuyerLimited(pub ErrorBody);

/// 429 on a sale route, from whichever bucket ran dry.
#[derive(IntoResponses)]
#[response(
    status = 429,
    description = "`rate_limited` by the gateway, the address's bucket or the buyer's (`X-Limited-By` says which)",
    headers(
        ("Retry-After" = u64, description = "seconds"),
        ("X-Limited-By" = String, description = "`gateway`, `service` (the address's bucket) or `buyer` (the buyer's)"),
    )
)]
pub struct SaleLimited(pub ErrorBody);

/// An admin route's refusals: no token, or not the admin's.
#[derive(IntoResponses)]
pub enum AdminRefused {
    /// 401.
    #[response(status = 401, description = "`unauthorized`: no bearer token")]
    Unauthorized(ErrorBody),
    /// 403.
    #[response(status = 403, description = "`forbidden`: not the admin token")]
    Forbidden(ErrorBody),
}

/// An order route's refusals of the request itself.
#[derive(IntoResponses)]
pub enum OrderRefused {
    /// 400.
    #[response(
        status = 400,
        description = "`bad_request`: a malformed order id or buyer, or no buyer"
    )]
    BadRequest(ErrorBody),
    /// 404.
    #[response(status = 404, description = "`unknown_order`")]
    UnknownOrder(ErrorBody),
}
