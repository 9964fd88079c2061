//! `GET /stock/{id}` and `GET /report`: the ledger; `GET /`: the same as a
//! live chart.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use super::AppState;
use crate::chart::{self, Bar};
use crate::error::ApiError;
use crate::ledger::{self, Ledger};
use crate::product::parse_id;
use crate::products;

/// The live dashboard (`GET /`): the comparison chart, refreshed every
/// second from `/report?format=svg`.
pub async fn dashboard() -> Html<&'static str> {
    Html(include_str!("dashboard.html"))
}

/// One product's ledger.
pub async fn one(
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<Ledger>, ApiError> {
    let Path(raw_id) = path.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let id = parse_id(&raw_id)?;
    let product = products::load(app.backends(), &mut *app.redis().await?, id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    let mut ledgers = ledger::compute(app.backends(), app.catalogue(), &[product]).await?;
    Ok(Json(ledgers.remove(0)))
}

/// `?format=json|csv|svg`.
#[derive(Debug, Deserialize)]
pub struct ReportQuery {
    format: Option<String>,
}

/// Every product's ledger: the comparison table.
pub async fn all(
    State(app): State<AppState>,
    query: Result<Query<ReportQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let products = products::all(app.backends()).await?;
    let ledgers = ledger::compute(app.backends(), app.catalogue(), &products).await?;
    match query.format.as_deref() {
        None | Some("json") => Ok(Json(ledgers).into_response()),
        Some("csv") => Ok((
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            ledger::to_csv(&ledgers),
        )
            .into_response()),
        Some("svg") => {
            let bars: Vec<Bar> = ledgers.iter().map(Bar::from_ledger).collect();
            Ok((
                [(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")],
                chart::svg("live: sold vs stock per product", &bars),
            )
                .into_response())
        }
        Some(other) => Err(ApiError::BadRequest(format!(
            "format must be json, csv or svg, got {:?}",
            crate::product::truncate(other, 20)
        ))),
    }
}
