//! The HTTP layer: shared state, the router, and thin handlers that parse,
//! call the domain, and map the result; the OpenAPI document of it all.

mod admin;
pub mod answers;
mod buy;
mod detach;
mod document;
mod hidden;
mod identify;
mod live;
mod meta;
mod operate;
mod orders;
pub mod params;
mod report;
mod reserve;

use std::sync::Arc;

use std::time::Duration;

use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::DefaultBodyLimit;
use axum::middleware::from_fn_with_state;
use axum::routing::MethodRouter;
use tower::ServiceBuilder;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::GlobalKeyExtractor;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt};
use utoipa_axum::routes;

use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::backends::master::PooledRedis;
use crate::instance::auth::Identify;
use crate::instance::edge;
use crate::instance::edge::buyers::BuyerBucket;
use crate::instance::edge::{ClientIp, EdgeArgs, Layer};
use crate::model::error::ApiError;
use crate::sale::Shop;
use crate::sale::guard::Guards;
use crate::sale::memory::Memory;
use crate::sale::reservation::Reservations;
use crate::stock::strategy::Catalogue;
pub use document::openapi;
use metrics_exporter_prometheus::PrometheusHandle;

/// What an instance believes: the admin token `PUT /admin/…` requires,
/// and how it knows a request's buyer.
pub struct Credentials {
    /// The bearer token of the admin routes.
    pub admin_token: String,
    /// How buyers are identified ([`crate::instance::auth`]).
    pub buyers: Identify,
}

/// State shared by every handler of one instance.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    /// What the buy use case needs, the backends and the catalogue among
    /// it; the instance's name, returned as `served_by` so a client can
    /// see the round-robin at work.
    shop: Arc<Shop>,
    /// The admin token and how buyers are identified.
    credentials: Credentials,
    /// Rate limits and overload settings, applied by [`router`] and shown
    /// by `GET /config`.
    edge: EdgeArgs,
    /// Renders `GET /metrics`.
    metrics: PrometheusHandle,
    /// Each buyer's token bucket, when on.
    buyer_bucket: Option<BuyerBucket>,
}

impl AppState {
    /// State for one instance.
    pub fn new(
        backends: Backends,
        instance: String,
        credentials: Credentials,
        reservations: Reservations,
        edge: EdgeArgs,
        memory: Arc<Memory>,
        metrics: PrometheusHandle,
    ) -> Self {
        let shop = Shop {
            backends,
            catalogue: Catalogue::new(),
            instance,
            reservations,
            memory,
            idempotency_ttl: Duration::from_secs(edge.idempotency_ttl_secs),
            guards: Guards::new(edge.guards()),
        };
        Self {
            inner: Arc::new(Inner {
                shop: Arc::new(shop),
                credentials,
                buyer_bucket: edge
                    .on(Layer::Buckets)
                    .then(|| BuyerBucket::new(edge.buyer_rate_per_sec, edge.buyer_rate_burst))
                    .flatten(),
                edge,
                metrics,
            }),
        }
    }

    /// The instance's shop: what the instance's own tasks (the reaper)
    /// share with the routes.
    pub fn shop(&self) -> &Arc<Shop> {
        &self.inner.shop
    }

    /// Each buyer's token bucket, when on.
    fn buyer_bucket(&self) -> Option<&BuyerBucket> {
        self.inner.buyer_bucket.as_ref()
    }

    /// How this instance identifies buyers.
    pub fn identify(&self) -> &Identify {
        &self.inner.credentials.buyers
    }

    fn backends(&self) -> &Backends {
        &self.inner.shop.backends
    }

    fn catalogue(&self) -> &Catalogue {
        &self.inner.shop.catalogue
    }

    /// One pooled Redis connection for the whole request: deadpool pings a
    /// connection on every checkout, so a handler takes one and shares it.
    async fn redis(&self) -> Result<PooledRedis, ApiError> {
        Ok(self
            .backends()
            .redis
            .get()
            .await
            .map_err(BackendError::from)?)
    }
}

/// Largest reset body accepted, as at the gateway (`client_max_body_size`).
const ADMIN_BODY_LIMIT: usize = 16 * 1024;

/// Every route of the contract; unknown paths and methods answer with the
/// contract's JSON error body like everything else. The buy route sits
/// behind the token buckets; every route behind load shedding and the
/// request timeout (each unless switched off, to measure what it costs).
/// Serve it with `ConnectInfo<SocketAddr>` (the buckets key on the peer
/// address).
pub fn router(state: AppState) -> Router {
    let edge = state.inner.edge.clone();
    let mut routes = Router::from(routes(Some(&state)))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed });
    // Each layer with its own error handler, so that either runs alone.
    if edge.on(Layer::Timeout) {
        routes = routes.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(edge::overload))
                .timeout(Duration::from_millis(edge.request_timeout_ms)),
        );
    }
    if edge.on(Layer::Shed) {
        routes = routes.layer(
            ServiceBuilder::new()
                .layer(HandleErrorLayer::new(edge::overload))
                .load_shed()
                .concurrency_limit(edge.max_in_flight.max(1)),
        );
    }
    routes.with_state(state)
}

/// The routes, each registered with its OpenAPI description in the same
/// call, so the router and [`openapi`] cannot drift apart. With `state`,
/// the routes that act for a buyer first identify it ([`identify`]),
/// and the buy and reserve routes get their token buckets (when on);
/// without, the routes are only read for their descriptions.
fn routes(state: Option<&AppState>) -> OpenApiRouter<AppState> {
    let for_buyer = |route: MethodRouter<AppState>| match state {
        Some(state) => route.layer(from_fn_with_state(state.clone(), identify::identify)),
        None => route,
    };
    let guarded = |route: MethodRouter<AppState>| match state {
        Some(state) if state.inner.edge.on(Layer::Buckets) => {
            rate_limited(for_buyer(route), &state.inner.edge)
        }
        _ => for_buyer(route),
    };
    OpenApiRouter::with_openapi(document::base())
        .routes(routes!(buy::buy).map(guarded))
        .routes(routes!(hidden::buy_on_path).map(guarded))
        .routes(routes!(hidden::issue).map(guarded))
        .routes(routes!(reserve::reserve).map(guarded))
        .routes(routes!(orders::view).map(for_buyer))
        .routes(routes!(orders::pay).map(for_buyer))
        .routes(routes!(orders::cancel).map(for_buyer))
        .routes(routes!(report::one))
        .routes(routes!(report::all))
        .routes(routes!(report::dashboard))
        .routes(routes!(live::view))
        .routes(routes!(admin::reset).layer(DefaultBodyLimit::max(ADMIN_BODY_LIMIT)))
        .routes(routes!(admin::reconcile))
        .routes(routes!(operate::restock).layer(DefaultBodyLimit::max(ADMIN_BODY_LIMIT)))
        .routes(routes!(operate::window).layer(DefaultBodyLimit::max(ADMIN_BODY_LIMIT)))
        .routes(routes!(meta::strategies))
        .routes(routes!(meta::healthz))
        .routes(routes!(meta::readyz))
        .routes(routes!(meta::metrics))
        .routes(routes!(meta::config))
        .routes(routes!(meta::openapi))
}

/// The per-client bucket (and the global one, when configured) around the
/// buy handler. Stale per-client entries are swept every two seconds so
/// the limiter's memory follows the active clients, not every client ever.
fn rate_limited(route: MethodRouter<AppState>, edge: &EdgeArgs) -> MethodRouter<AppState> {
    let per_client = GovernorConfigBuilder::default()
        .key_extractor(ClientIp::new(&edge.trusted_proxies))
        .period(edge::refill_period(edge.rate_per_sec))
        .burst_size(edge.rate_burst.max(1))
        .finish()
        .expect("a non-zero period and burst always make a config");
    edge::keep_swept(per_client.limiter());
    let mut route = route.layer(GovernorLayer::new(per_client).error_handler(edge::governor_error));
    if edge.global_rate_per_sec > 0 {
        let global = GovernorConfigBuilder::default()
            .key_extractor(GlobalKeyExtractor)
            .period(edge::refill_period(edge.global_rate_per_sec))
            .burst_size(
                u32::try_from(edge.global_rate_per_sec)
                    .unwrap_or(u32::MAX)
                    .max(1),
            )
            .finish()
            .expect("a non-zero period and burst always make a config");
        route = route.layer(GovernorLayer::new(global).error_handler(edge::governor_error));
    }
    route
}
