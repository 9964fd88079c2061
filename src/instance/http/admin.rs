//! `PUT /admin/products/{id}`: create or reset a product;
//! `POST /admin/reconcile`: each counter against the durable truth.

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequestParts, Query, State};
use axum::http::request::Parts;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use utoipa::IntoParams;

use super::AppState;
use super::answers::{AdminRefused, BackendFailed};
use super::detach::to_the_end;
use super::params::ProductId;
use crate::model::error::{ApiError, ErrorBody};
use crate::model::product::{Product, ResetRequest, parse_id};
use crate::orders::life;
use crate::orders::life::reconcile::Drift;
use crate::sale::memory;
use crate::sale::product_store;

/// Resets the product to the body's stock, strategy and settings.
#[utoipa::path(
    put,
    path = "/admin/products/{id}",
    tag = "admin",
    params(ProductId),
    request_body = ResetRequest,
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "the product as reset: new epoch, no orders", body = Product),
        (status = 400, description = "`bad_request`: a malformed id or body, a setting out of range, an unknown strategy", body = ErrorBody),
        AdminRefused,
        (status = 413, description = "`bad_request` from the gateway: a body over 16 KiB", body = ErrorBody),
        BackendFailed,
    )
)]
pub async fn reset(
    State(app): State<AppState>,
    _admin: Admin,
    ProductId { id }: ProductId,
    body: Result<Json<ResetRequest>, JsonRejection>,
) -> Result<Json<Product>, ApiError> {
    let Json(request) = body?;
    product_store::validate(&request, app.catalogue())?;
    let product = to_the_end(async move { reset_everywhere(&app, id, &request).await }).await?;
    Ok(Json(product))
}

/// The reset, then every instance told: each forgets the product's
/// sold-out flag and its copy of the product before the reset answers, so
/// nobody refuses the new stock or sells at the old reset.
async fn reset_everywhere(
    app: &AppState,
    id: i64,
    request: &ResetRequest,
) -> Result<Product, ApiError> {
    let product = product_store::reset(app.backends(), app.catalogue(), id, request).await?;
    app.shop().memory.forget(id);
    memory::broadcast_reset(&mut *app.redis().await?, id).await?;
    tracing::info!(product = id, strategy = %product.strategy, stock = product.initial, epoch = product.epoch, "product reset");
    Ok(product)
}

/// A request that carries the admin token, checked before anything of the
/// request is read: 401 without a bearer token, 403 with a wrong one. The
/// comparison runs in constant time so the token cannot be guessed byte by
/// byte from timings.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, app: &AppState) -> Result<Self, ApiError> {
        let presented = crate::instance::auth::bearer(&parts.headers).map_err(|_| {
            ApiError::Unauthorized("missing admin token: Authorization: Bearer <token>".into())
        })?;
        let expected = app.inner.credentials.admin_token.as_bytes();
        match bool::from(presented.as_bytes().ct_eq(expected)) {
            true => Ok(Self),
            false => Err(ApiError::Forbidden),
        }
    }
}

/// `POST /admin/reconcile`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReconcileQuery {
    /// Put owed units back and set each drifting counter to its truth;
    /// without it, only report.
    #[serde(default)]
    pub repair: bool,
    /// Only this product (default: every product).
    #[param(minimum = 1)]
    pub product: Option<i64>,
}

/// Compares each product's stock counter with the durable truth (units on
/// sale less those held, paid or owed back) and, with `repair`, sets it
/// to the truth without ever selling what is held.
#[utoipa::path(
    post,
    path = "/admin/reconcile",
    tag = "admin",
    params(ReconcileQuery),
    security(("admin_token" = [])),
    responses(
        (status = 200, description = "each product's drift, and what the repair did", body = Vec<Drift>),
        (status = 400, description = "`bad_request`: a malformed query", body = ErrorBody),
        AdminRefused,
        BackendFailed,
        (status = 503, description = "`unavailable`: a backend is down, or a product's lock was not acquired", body = ErrorBody),
    )
)]
pub async fn reconcile(
    State(app): State<AppState>,
    _admin: Admin,
    query: Result<Query<ReconcileQuery>, QueryRejection>,
) -> Result<Json<Vec<Drift>>, ApiError> {
    let Query(query) = query?;
    let ids = match query.product {
        Some(id) => vec![parse_id(&id.to_string())?],
        None => Vec::new(),
    };
    let (shop, repair) = (app.shop().clone(), query.repair);
    let drifts = to_the_end(async move { life::reconcile::run(&shop, &ids, repair).await }).await?;
    if query.repair {
        tracing::info!(products = drifts.len(), "reconciled with repair");
    }
    Ok(Json(drifts))
}
