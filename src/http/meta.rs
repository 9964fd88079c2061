//! `GET /strategies`, `/healthz`, `/readyz`, `/metrics`, `/config`.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::AppState;
use crate::error::ApiError;
use crate::info::Info;

/// The strategy catalogue.
pub async fn strategies(State(app): State<AppState>) -> Json<Vec<Info>> {
    Json(app.catalogue().infos())
}

/// Liveness: the process answers.
pub async fn healthz(State(app): State<AppState>) -> Json<Value> {
    Json(json!({"status": "ok", "instance": app.inner.instance}))
}

/// Readiness: Redis and PostgreSQL both answer.
pub async fn readyz(State(app): State<AppState>) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(
        json!({"status": "ready", "instance": app.inner.instance}),
    ))
}

/// This instance's metrics in Prometheus' text format.
pub async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.inner.metrics.render(),
    )
}

/// The effective limits and settings (no secrets: the admin token is not
/// among them), and what the backends keep after a crash.
pub async fn config(State(app): State<AppState>) -> Json<Value> {
    Json(json!({
        "instance": app.inner.instance,
        "persistence": crate::backends::persistence::read(app.backends()).await,
        "edge": app.inner.edge,
        "product_defaults": crate::product::Settings::default(),
        "strategies": app.catalogue().ids(),
    }))
}
