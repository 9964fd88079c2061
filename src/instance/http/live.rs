//! `GET /live`: what the live page (`GET /`) draws, in one answer: every
//! product's ledger and comparison bar, and its last minute on every
//! instance (answers per second, latencies, who served what).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::answers::{BackendFailed, Unavailable};
use crate::instance::chart;
use crate::instance::chart::Bar;
use crate::model::error::ApiError;
use crate::model::product::now_ms;
use crate::orders::ledger;
use crate::orders::ledger::Ledger;
use crate::sale::guard::PathState;
use crate::sale::live;
use crate::sale::live::Minute;
use crate::sale::product_store;

/// The live view.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiveView {
    /// When it was read, in ms since the Unix epoch.
    pub now_ms: u64,
    /// The answers each `counts` array counts, in order.
    pub outcomes: Vec<&'static str>,
    /// The latency buckets' upper bounds in ms, in order; each `latency`
    /// array has one more, for the rest.
    pub buckets_ms: Vec<u64>,
    /// The order-life events each `life` array counts, in order.
    pub life_events: Vec<&'static str>,
    /// The comparison chart (`GET /report?format=svg`) of the same ledgers.
    pub chart_svg: String,
    /// Every product, ascending by id.
    pub products: Vec<LiveProduct>,
    /// The answering instance's backend paths now: each one's adaptive
    /// limit, buys in flight and breaker state (as `GET /config` shows
    /// them), so the page shows a path closing down as it happens.
    pub paths: Vec<PathState>,
}

/// One product in the live view.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiveProduct {
    /// Its ledger: durable orders against the stock.
    pub ledger: Ledger,
    /// Whether its strategy is expected never to oversell.
    pub safe: bool,
    /// Its last minute, added up over the instances.
    pub minute: Minute,
}

/// The live view: every product's ledger and its last minute.
#[utoipa::path(
    get,
    path = "/live",
    tag = "ledger",
    responses(
        (status = 200, description = "every product's ledger, chart and last minute", body = LiveView),
        BackendFailed,
        Unavailable,
    )
)]
pub async fn view(State(app): State<AppState>) -> Result<Json<LiveView>, ApiError> {
    let now = now_ms();
    let products = product_store::all(app.backends()).await?;
    let ledgers = ledger::compute(app.backends(), app.catalogue(), &products).await?;
    let mut minutes = live::merge(&live::read(app.backends(), now).await?);
    let bars: Vec<Bar> = ledgers.iter().map(Bar::from_ledger).collect();
    Ok(Json(LiveView {
        now_ms: now,
        outcomes: live::OUTCOMES.to_vec(),
        buckets_ms: live::BUCKETS_MS.to_vec(),
        life_events: live::LIFE_EVENTS.to_vec(),
        chart_svg: chart::svg("live: sold vs stock per product", &bars),
        products: ledgers
            .into_iter()
            .map(|ledger| LiveProduct {
                safe: app
                    .catalogue()
                    .get(&ledger.strategy)
                    .is_some_and(|s| s.info().safe),
                minute: minutes.remove(&ledger.id).unwrap_or_default(),
                ledger,
            })
            .collect(),
        paths: app.shop().guards.paths(),
    }))
}
