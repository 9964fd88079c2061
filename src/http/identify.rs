//! The buyer of a request, established before its handler runs (and
//! before the per-buyer bucket, which keys on it): [`crate::auth`] says
//! how.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use crate::auth::Buyer;

/// Puts the request's [`Buyer`] in its extensions, or answers 400 (a
/// malformed declared id) or 401 (no valid token) without going on.
pub async fn identify(State(app): State<AppState>, mut request: Request, next: Next) -> Response {
    let buyer = app.identify().buyer(request.headers(), request.uri());
    match buyer {
        Ok(buyer) => {
            request.extensions_mut().insert(Buyer(buyer));
            next.run(request).await
        }
        Err(error) => error.into_response(),
    }
}
