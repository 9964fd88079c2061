//! The HTTP layer: shared state, the router, and thin handlers that parse,
//! call the domain, and map the result.

mod admin;
mod buy;
mod meta;
mod report;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};

use crate::error::ApiError;
use crate::strategy::{Backends, Registry};

/// State shared by every handler of one instance.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    /// Redis and PostgreSQL pools.
    backends: Backends,
    /// Strategies by id.
    registry: Registry,
    /// This instance's name, returned as `served_by` so a client can see
    /// the round-robin at work.
    instance: String,
    /// The bearer token `PUT /admin/…` requires.
    admin_token: String,
}

impl AppState {
    /// State for one instance.
    pub fn new(backends: Backends, instance: String, admin_token: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                backends,
                registry: Registry::new(),
                instance,
                admin_token,
            }),
        }
    }

    fn backends(&self) -> &Backends {
        &self.inner.backends
    }

    fn registry(&self) -> &Registry {
        &self.inner.registry
    }
}

/// Every route of the contract; unknown paths and methods answer with the
/// contract's JSON error body like everything else.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/stock/{id}/buy", post(buy::buy))
        .route("/stock/{id}", get(report::one))
        .route("/report", get(report::all))
        .route("/admin/products/{id}", put(admin::reset))
        .route("/strategies", get(meta::strategies))
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        .fallback(|| async { ApiError::NotFound })
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .with_state(state)
}
