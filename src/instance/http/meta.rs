//! `GET /strategies`, `/healthz`, `/readyz`, `/metrics`, `/config`,
//! `/openapi.json`.

use std::sync::LazyLock;

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::backends::persistence::Persistence;
use crate::instance::auth::BuyerAuth;
use crate::instance::edge::EdgeArgs;
use crate::model::error::{ApiError, ErrorBody};
use crate::model::info::Info;
use crate::model::product::Settings;
use crate::sale::guard::PathState;

/// The answer of `/healthz` and `/readyz`: which instance answered, so a
/// check through the gateway shows the round-robin too.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok` (the process answers) or `ready` (its backends answer too).
    #[schema(value_type = String, examples("ok", "ready"))]
    status: &'static str,
    /// The instance's name.
    instance: String,
}

/// The effective limits and settings of an instance (`GET /config`). No
/// secrets: the admin token is not among them.
#[derive(Debug, Serialize, ToSchema)]
pub struct Config {
    /// The instance's name.
    instance: String,
    /// What the backends keep after a crash, as they report it.
    persistence: Persistence,
    /// Its rate limits and overload protection.
    edge: EdgeArgs,
    /// Each backend path bought on so far: its adaptive limit, what is in
    /// flight and its circuit breaker, now.
    paths: Vec<PathState>,
    /// How it identifies buyers (`header` or `token`).
    buyer_auth: BuyerAuth,
    /// What a reset leaves unset takes these.
    product_defaults: Settings,
    /// The catalogue's strategy ids.
    #[schema(value_type = Vec<String>)]
    strategies: Vec<&'static str>,
}

/// The strategy catalogue.
#[utoipa::path(
    get,
    path = "/strategies",
    tag = "meta",
    responses((status = 200, description = "every strategy, in catalogue order", body = Vec<Info>))
)]
pub async fn strategies(State(app): State<AppState>) -> Json<Vec<&'static Info>> {
    Json(app.catalogue().infos())
}

/// Liveness: the process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    responses((status = 200, description = "alive", body = Health))
)]
pub async fn healthz(State(app): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        instance: app.shop().instance.clone(),
    })
}

/// Readiness: Redis and PostgreSQL both answer.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "meta",
    responses(
        (status = 200, description = "Redis and PostgreSQL answer", body = Health),
        (status = 503, description = "`not_ready`: a backend does not answer", body = ErrorBody),
    )
)]
pub async fn readyz(State(app): State<AppState>) -> Result<Json<Health>, ApiError> {
    let backends = app.backends();
    let mut conn = backends
        .redis
        .get()
        .await
        .map_err(|e| ApiError::NotReady(format!("redis: {e}")))?;
    let _: String = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .map_err(|e| ApiError::NotReady(format!("redis: {e}")))?;
    sqlx::query("SELECT 1")
        .execute(&backends.pg)
        .await
        .map_err(|e| ApiError::NotReady(format!("postgres: {e}")))?;
    Ok(Json(Health {
        status: "ready",
        instance: app.shop().instance.clone(),
    }))
}

/// This instance's metrics in Prometheus' text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    responses((status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.inner.metrics.render(),
    )
}

/// The effective limits and settings, and what the backends keep after a
/// crash.
#[utoipa::path(
    get,
    path = "/config",
    tag = "meta",
    responses((status = 200, description = "limits and product defaults", body = Config))
)]
pub async fn config(State(app): State<AppState>) -> Json<Config> {
    Json(Config {
        instance: app.shop().instance.clone(),
        persistence: crate::backends::persistence::read(app.backends()).await,
        edge: app.inner.edge.clone(),
        paths: app.shop().guards.paths(),
        buyer_auth: app.identify().mode(),
        product_defaults: Settings::default(),
        strategies: app.catalogue().ids(),
    })
}

/// The OpenAPI document of this contract, rendered once per process: it
/// is built from the code and does not change while it runs.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "meta",
    responses((status = 200, description = "this document (OpenAPI 3.1)", content_type = "application/json", body = Object))
)]
pub async fn openapi() -> impl IntoResponse {
    static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
        super::openapi()
            .to_json()
            .expect("an OpenAPI document always serializes")
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.as_str(),
    )
}
