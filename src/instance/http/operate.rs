//! `POST /admin/products/{id}/restock`: units added to a live sale
//! without a reset.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;

use super::AppState;
use super::admin::Admin;
use super::answers::{AdminRefused, BackendFailed};
use super::detach::to_the_end;
use super::params::ProductId;
use crate::model::error::{ApiError, ErrorBody};
use crate::model::product::operation::RestockRequest;
use crate::sale::operate::{self, Restocked};

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
