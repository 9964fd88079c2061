//! `GET /stock/{id}` and `GET /report`: the ledger; `GET /`: the live page
//! (its data: `GET /live`).

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::answers::{BackendFailed, UnknownProduct};
use super::params::ProductId;
use crate::instance::chart;
use crate::instance::chart::Bar;
use crate::model::error::{ApiError, ErrorBody};
use crate::orders::ledger;
use crate::orders::ledger::Ledger;
use crate::sale::{placement, product_store};
use crate::stock::lock::Reading;

/// The live page (`GET /`): the comparison chart and each product's last
/// minute, refreshed every second from `GET /live`.
#[utoipa::path(
    get,
    path = "/",
    tag = "ledger",
    responses((status = 200, description = "the dashboard page, no external assets", content_type = "text/html", body = String))
)]
pub async fn dashboard() -> Html<&'static str> {
    Html(include_str!("dashboard.html"))
}

/// One product's ledger, with where its stock lives.
#[utoipa::path(
    get,
    path = "/stock/{id}",
    tag = "ledger",
    params(ProductId),
    responses(
        (status = 200, description = "the product's ledger", body = Ledger),
        (status = 400, description = "`bad_request`: a malformed id", body = ErrorBody),
        UnknownProduct,
        BackendFailed,
        (status = 503, description = "`unavailable`: a backend is down; `busy`: (`zookeeper` with `recipe: read-write`) the read lock was not acquired within `acquire_timeout_ms`", body = ErrorBody),
    )
)]
pub async fn one(
    State(app): State<AppState>,
    ProductId { id }: ProductId,
) -> Result<Json<Ledger>, ApiError> {
    let mut conn = app.redis().await?;
    let product = product_store::load(app.backends(), &mut conn, id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    // Under a read/write lock, the query reads as a reader: after the
    // buyers that came before it, alongside other queries.
    let reading = match app.catalogue().get(&product.strategy) {
        Some(strategy) => strategy.reading(app.backends(), &product).await?,
        None => Reading::Unlocked,
    };
    if let Reading::TimedOut = reading {
        return Err(ApiError::busy(
            "the read lock was not acquired within acquire_timeout_ms",
        ));
    }
    let store = app.catalogue().store(&product);
    let placement = placement::of(&mut conn, store.cells()).await?;
    let mut ledgers = ledger::compute(app.backends(), app.catalogue(), &[product]).await?;
    let mut ledger = ledgers.remove(0);
    ledger.placement = Some(placement);
    Ok(Json(ledger))
}

/// `GET /report`'s query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ReportQuery {
    /// The table as JSON (default), CSV, or the chart as SVG.
    #[param(inline)]
    format: Option<Format>,
}

/// The shapes of the report.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// One [`Ledger`] per product.
    Json,
    /// A header line and one line per product.
    Csv,
    /// The comparison chart the dashboard shows.
    Svg,
}

/// Every product's ledger: the comparison table.
#[utoipa::path(
    get,
    path = "/report",
    tag = "ledger",
    params(ReportQuery),
    responses(
        (status = 200, description = "every product's ledger", content(
            (Vec<Ledger> = "application/json"),
            (String = "text/csv"),
            (String = "image/svg+xml"),
        )),
        (status = 400, description = "`bad_request`: an unknown format", body = ErrorBody),
        BackendFailed,
    )
)]
pub async fn all(
    State(app): State<AppState>,
    query: Result<Query<ReportQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(query) = query?;
    let products = product_store::all(app.backends()).await?;
    let ledgers = ledger::compute(app.backends(), app.catalogue(), &products).await?;
    match query.format.unwrap_or(Format::Json) {
        Format::Json => Ok(Json(ledgers).into_response()),
        Format::Csv => Ok((
            [(header::CONTENT_TYPE, "text/csv; charset=utf-8")],
            ledger::to_csv(&ledgers),
        )
            .into_response()),
        Format::Svg => {
            let bars: Vec<Bar> = ledgers.iter().map(Bar::from_ledger).collect();
            Ok((
                [(header::CONTENT_TYPE, "image/svg+xml; charset=utf-8")],
                chart::svg("live: sold vs stock per product", &bars),
            )
                .into_response())
        }
    }
}
