//! A live sale operated without a reset: units added
//! (`POST /admin/products/{id}/restock`), the sale paused, resumed or
//! closed (`POST /admin/products/{id}/window`).

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;

use super::AppState;
use super::admin::Admin;
use super::answers::{AdminRefused, BackendFailed};
use super::detach::to_the_end;
use super::params::ProductId;
use crate::model::error::{ApiError, ErrorBody};
use crate::model::product::operation::{RestockRequest, WindowRequest};
use crate::sale::operate::{self, Restocked};
use crate::sale::window::{self as sale_window, WindowMoved};

/// Adds units to the product's live sale: its orders, holds and settings
/// stay; the ledger's `initial` grows by the units, and every instance
/// forgets that the product sold out. Runs to its end whatever the
/// client does; a retry with the same `addition_id` adds nothing twice.
#[utoipa::path(
    post,
    path = "/admin/products/{id}/restock",
    tag = "admin",
    params(ProductId),
    request_body = RestockRequest,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "the addition in effect (`replayed`: made by an earlier request with this id)", body = Restocked),
        (status = 400, description = "`bad_request`: a malformed id or body, units out of range", body = ErrorBody),
        AdminRefused,
        (status = 404, description = "`unknown_product`", body = ErrorBody),
        BackendFailed,
        (status = 503, description = "nothing added: `unavailable` (a backend is down), `busy` (the product's lock was not acquired in time, or the product was reset meanwhile), `outcome_unknown` (retry with the same `addition_id` to learn)", body = ErrorBody),
    )
)]
pub async fn restock(
    State(app): State<AppState>,
    _admin: Admin,
    ProductId { id }: ProductId,
    body: Result<Json<RestockRequest>, JsonRejection>,
) -> Result<Json<Restocked>, ApiError> {
    let Json(request) = body?;
    request.validate()?;
    let shop = app.shop().clone();
    let added = to_the_end(async move { operate::add_stock(&shop, id, request).await }).await?;
    Ok(Json(added))
}

/// Pauses, resumes or closes the product's sale: its orders, holds,
/// stock and reset stay. Answers once no instance admits a buy under the
/// old window (a buy sent after the 200 is judged by the new one); runs
/// to its end whatever the client does, and a retry changes nothing
/// twice.
#[utoipa::path(
    post,
    path = "/admin/products/{id}/window",
    tag = "admin",
    params(ProductId),
    request_body = WindowRequest,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "the window in effect (`changed`: false when it already was as asked)", body = WindowMoved),
        (status = 400, description = "`bad_request`: a malformed id or body, an unknown action", body = ErrorBody),
        AdminRefused,
        (status = 404, description = "`unknown_product`", body = ErrorBody),
        (status = 410, description = "`ended`: a closed sale is neither paused nor resumed", body = ErrorBody),
        BackendFailed,
        (status = 503, description = "nothing changed: `unavailable` (a backend is down), `busy` (the product was reset meanwhile)", body = ErrorBody),
    )
)]
pub async fn window(
    State(app): State<AppState>,
    _admin: Admin,
    ProductId { id }: ProductId,
    body: Result<Json<WindowRequest>, JsonRejection>,
) -> Result<Json<WindowMoved>, ApiError> {
    let Json(request) = body?;
    let shop = app.shop().clone();
    let moved =
        to_the_end(async move { sale_window::change(&shop, id, request.action).await }).await?;
    Ok(Json(moved))
}
