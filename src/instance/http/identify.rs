//! The buyer of a request, established before its handler runs (and
//! before the per-buyer bucket, which keys on it): [`crate::instance::auth`] says
//! how.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use std::time::Duration;

use super::AppState;
use crate::instance::auth::Buyer;
use crate::model::error::{ApiError, Limiter};
use crate::model::telemetry;
use crate::sale::live;

/// Puts the request's [`Buyer`] in its extensions and takes a token from
/// its bucket; or answers 400 (a malformed declared id), 401 (no valid
/// token) or 429 (the buyer's bucket is empty) without going on.
pub async fn identify(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let now_s = app.shop().backends.clock.now_ms() / 1000;
    let buyer = match app
        .identify()
        .buyer(request.headers(), request.uri(), now_s)
    {
        Ok(buyer) => buyer,
        Err(error) => return error.into_response(),
    };
    if let Some(bucket) = app.buyer_bucket()
        && let Err(wait) = bucket.take(&buyer)
    {
        telemetry::rejected("buyer_rate_limited");
        let memory = &app.shop().memory;
        if let Some(product) = bought(&request)
            && memory.knows(product)
        {
            memory.tell_live(product, live::Answer::RateLimited, Duration::ZERO);
        }
        return ApiError::RateLimited {
            retry_after: wait.max(Duration::from_secs(1)),
            by: Limiter::Buyer,
        }
        .into_response();
    }
    request.extensions_mut().insert(Buyer(buyer));
    next.run(request).await
}

/// The product a buy is for, by the route the router matched (the plain
/// buy, `/stock/{id}/buy`, and a hidden path's, `/stock/{id}/buy/{path}`),
/// for the live view.
fn bought(request: &Request) -> Option<i64> {
    let route = request.extensions().get::<MatchedPath>()?.as_str();
    if !route.starts_with("/stock/{id}/buy") {
        return None;
    }
    let id = request.uri().path().split('/').nth(2)?;
    id.parse().ok().filter(|id| *id > 0)
}
