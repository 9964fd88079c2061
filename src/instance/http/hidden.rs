//! A product's hidden buy path (`hidden_path`, [`crate::sale::hidden`]):
//! `GET /stock/{id}/path` hands an identified buyer a one-time path inside
//! the sale window; `POST /stock/{id}/buy/{path}` buys on it.

use std::time::Instant;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::answers::{BuyerLimited, Unavailable, UnknownProduct};
use super::params::{BuyerHeader, ProductId};
use crate::instance::auth::{Buyer, UserQuery};
use crate::model::error::{ApiError, ErrorBody};
use crate::model::product::Product;
use crate::sale::hidden;
use crate::sale::product_store;

/// A buy path handed out.
#[derive(Debug, Serialize, ToSchema)]
pub struct BuyPath {
    /// The product.
    pub product_id: i64,
    /// Where to buy, once: `POST` it (relative to the gateway).
    pub path: String,
    /// Until when it may be bought on, in ms since the Unix epoch.
    pub expires_at_ms: u64,
}

/// The buyer's one-time buy path for a product with `hidden_path`, inside
/// its sale window: bound to the buyer, the product and its reset, valid
/// for 10 s. Asking again gives another.
#[utoipa::path(
    get,
    path = "/stock/{id}/path",
    tag = "sale",
    security((), ("buyer_token" = [])),
    params(
        ProductId,
        BuyerHeader,
        UserQuery,
    ),
    responses(
        (status = 200, description = "the buyer's path, to buy on once", body = BuyPath),
        (status = 400, description = "`bad_request`: a malformed id or buyer, or no buyer", body = ErrorBody),
        (status = 401, description = "`unauthorized`: with `buyer_auth = token`, no valid buyer token", body = ErrorBody),
        (status = 403, description = "`not_started`: the sale opens in `seconds_left` s (no path before)", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "seconds until the sale opens"),
        )),
        UnknownProduct,
        (status = 409, description = "`no_path`: the product sells on its plain path", body = ErrorBody),
        (status = 410, description = "`ended`: the sale window has closed", body = ErrorBody),
        BuyerLimited,
        Unavailable,
    )
)]
pub async fn issue(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    ProductId { id }: ProductId,
) -> Result<Json<BuyPath>, ApiError> {
    let product = product(&app, id).await?;
    if !product.settings.hidden_path {
        return Err(ApiError::NoPath);
    }
    let now = app.backends().clock.now_ms();
    product.settings.admits(now)?;
    let keys = &app.shop().reservations;
    let issued = hidden::issue(keys, id, product.epoch, &buyer, now);
    Ok(Json(BuyPath {
        product_id: id,
        path: format!("/stock/{id}/buy/{}", issued.token),
        expires_at_ms: issued.expires_at_ms,
    }))
}

/// The instance's copy of product `id`, or the store's.
async fn product(app: &AppState, id: i64) -> Result<Product, ApiError> {
    if let Ok(listed) = app.shop().memory.products.get(id) {
        return Ok(listed.product.clone());
    }
    let mut conn = app.redis().await?;
    product_store::load(app.backends(), &mut conn, id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))
}

/// The `{path}` segment of a hidden buy: the token to check.
#[derive(Deserialize)]
pub struct Token {
    /// The token, as `GET /stock/{id}/path` handed it out.
    pub path: String,
}

/// Buys one unit on a hidden path from `GET /stock/{id}/path`, once; the
/// rest as `POST /stock/{id}/buy` (its headers and answers).
#[utoipa::path(
    post,
    path = "/stock/{id}/buy/{path}",
    tag = "sale",
    security((), ("buyer_token" = [])),
    params(
        ProductId,
        ("path" = String, Path, description = "the token of the buyer's path"),
        BuyerHeader,
        UserQuery,
        ("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 128,
         pattern = "^[!-~]+$",
         description = "a retry on the same path with the same key gets the original order back"),
    ),
    responses(
        (status = 200, description = "sold: one order recorded", body = crate::sale::idempotency::Sold),
        (status = 400, description = "`bad_request`: a malformed id, buyer or Idempotency-Key", body = ErrorBody),
        (status = 401, description = "`unauthorized`: with `buyer_auth = token`, no valid buyer token", body = ErrorBody),
        (status = 403, description = "`bad_path`: not this buyer's path for this product and reset, expired, used already, or the product has no hidden path; \\
                                      `not_started`, `not_reserved` as on the plain path", body = ErrorBody),
        UnknownProduct,
        (status = 409, description = "`sold_out` or `limit_reached`", body = ErrorBody),
        (status = 410, description = "`ended`", body = ErrorBody),
        (status = 429, description = "`rate_limited` (`X-Limited-By` says which bucket)", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "seconds"),
            ("X-Limited-By" = String, description = "`gateway`, `service` or `buyer`"),
        )),
        (status = 500, description = "`backend`: a backend failed; a sale is recorded whole or not at all", body = ErrorBody),
        (status = 503, description = "`busy`, `unavailable` or `outcome_unknown`, as on the plain path", body = ErrorBody),
    )
)]
pub async fn buy_on_path(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    ProductId { id }: ProductId,
    token: Result<Path<Token>, PathRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let Path(Token { path }) = token?;
    super::buy::sell(&app, buyer, id, &headers, Some(path), started).await
}
