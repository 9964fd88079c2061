//! `POST /stock/{id}/buy`: parses the request, calls the use case
//! ([`crate::sale::buy`]) and maps its answer.

use std::time::Instant;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::AppState;
use super::answers::{BuyerUnauthorized, SaleLimited, UnknownProduct};
use super::params::ProductId;
use crate::instance::auth::{Buyer, UserQuery};
use crate::model::error::{ApiError, ErrorBody};
use crate::sale;
use crate::sale::idempotency;
use crate::sale::idempotency::Sold;
use crate::sale::live;
use crate::sale::{Bought, Purchase};

/// Sells one unit to the buyer, under the product's strategy. The body is
/// ignored (JMeter posts an empty form body).
#[utoipa::path(
    post,
    path = "/stock/{id}/buy",
    tag = "sale",
    security((), ("buyer_token" = [])),
    params(
        ProductId,
        ("X-User-Id" = String, Header, min_length = 1, max_length = 64,
         pattern = "^[A-Za-z0-9._:@-]+$",
         description = "the buyer; `?user=` is accepted in its place, for clients that \
                        cannot set a header (OpenAPI cannot say \"one of the two\")"),
        UserQuery,
        ("X-Reservation" = Option<String>, Header, nullable = false, min_length = 1, max_length = 128,
         pattern = "^[!-~]+$",
         description = "the buyer's reservation (`POST /stock/{id}/reserve`), for a product with `prebooking`"),
        ("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 128,
         pattern = "^[!-~]+$",
         description = "a retry with the same key (same product, buyer and reset) gets \
                        the original order back instead of buying again"),
    ),
    responses(
        (status = 200, description = "sold: one order recorded", body = Sold, headers(
            ("Idempotent-Replayed" = String, description = "`true` when this is the answer of an earlier request with the same Idempotency-Key"),
        )),
        (status = 400, description = "`bad_request`: a malformed id, buyer or Idempotency-Key, or no buyer", body = ErrorBody),
        BuyerUnauthorized,
        (status = 403, description = "`not_started`: the product's sale window opens in `seconds_left` s; \
                                      `not_reserved`: the product sells only to buyers holding a reservation; \
                                      `bad_path`: the product sells only on a hidden path (`GET /stock/{id}/path`)", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "seconds until the sale opens"),
        )),
        UnknownProduct,
        (status = 410, description = "`ended`: the product's sale window has closed", body = ErrorBody),
        (status = 409, description = "`sold_out` (between waves: with `seconds_left`, `opens_at_ms` and `Retry-After` for the next one), or `limit_reached` (the buyer holds the product's per-user limit)", body = ErrorBody),
        SaleLimited,
        (status = 500, description = "`backend`: a backend failed; a sale is recorded whole or not at all", body = ErrorBody),
        (status = 503, description = "`busy` (lock not acquired in time, retries exhausted, overloaded: nothing was sold), \
                                      `unavailable` (a backend was down before anything was sent), or \
                                      `outcome_unknown` (the sale may have happened: retry with the same Idempotency-Key)",
         body = ErrorBody, headers(("Retry-After" = u64, description = "seconds"))),
    )
)]
pub async fn buy(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    ProductId { id }: ProductId,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    sell(&app, buyer, id, &headers, None, Instant::now()).await
}

/// One buy of product `id` by `buyer`, on its plain path or on the
/// hidden `path`: the use case called, its answer mapped and counted in
/// the live view.
pub(super) async fn sell(
    app: &AppState,
    buyer: String,
    id: i64,
    headers: &HeaderMap,
    path: Option<String>,
    started: Instant,
) -> Result<Response, ApiError> {
    let purchase = Purchase {
        product: id,
        buyer,
        reservation: reservation(headers)?.map(str::to_owned),
        key: idempotency::parse(headers)?,
        path,
        request_id: request_id(headers),
    };
    let bought = sale::buy(app.shop(), purchase, started).await;
    // The live view counts what buyers of a known product were told.
    if let Some(kind) = live::Answer::of(bought.as_ref().err().map(ApiError::code)) {
        app.shop().memory.tell_live(id, kind, started.elapsed());
    }
    match bought? {
        Bought::New(sold) => Ok(Json(sold).into_response()),
        Bought::Replayed(sold) => Ok(replayed(sold)),
    }
}

/// The gateway's request id (nginx sets `X-Request-Id` to its
/// `$request_id`), or a fresh one for a direct call, so one buy can be
/// followed through the logs.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map_or_else(|| Uuid::new_v4().simple().to_string(), str::to_owned)
}

/// A replayed sale: the original answer, marked as such.
fn replayed(sold: Sold) -> Response {
    let mut response = Json(sold).into_response();
    response
        .headers_mut()
        .insert(idempotency::REPLAYED, HeaderValue::from_static("true"));
    response
}

/// Longest `X-Reservation` accepted (a token is 64 hex digits).
const MAX_RESERVATION_LEN: usize = 128;

/// `X-Reservation`, when sent: 1 to 128 visible ASCII characters, as the
/// document says, checked on every buy — a malformed one is refused
/// whether or not the product takes reservations (Schemathesis sent an
/// empty one to a product without pre-booking and it was accepted).
fn reservation(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get("x-reservation") else {
        return Ok(None);
    };
    let visible = |token: &str| token.bytes().all(|b| (b'!'..=b'~').contains(&b));
    match value.to_str() {
        Ok(token) if !token.is_empty() && token.len() <= MAX_RESERVATION_LEN && visible(token) => {
            Ok(Some(token))
        }
        _ => Err(ApiError::BadRequest(format!(
            "X-Reservation must be 1 to {MAX_RESERVATION_LEN} visible ASCII characters"
        ))),
    }
}
