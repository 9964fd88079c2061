//! What the handlers take from a request's path, declared once for the
//! router and for the OpenAPI document alike: a product id ([`ProductId`]),
//! an order id ([`OrderId`]), and the buyer's header ([`BuyerHeader`];
//! the middleware in [`crate::instance::auth`] reads it, the handlers
//! take the [`crate::instance::auth::Buyer`] it found).

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use serde::Deserialize;
use utoipa::IntoParams;
use uuid::Uuid;

use crate::model::error::ApiError;
use crate::model::product::{parse_id, truncate};

/// The `{id}` segment as sent, parsed by the extractors below (a typed
/// `Path` would answer axum's own words for a bad one).
#[derive(Deserialize)]
struct Segment {
    id: String,
}

/// The raw `{id}` of a request's path.
async fn segment(parts: &mut Parts) -> Result<String, ApiError> {
    let Path(Segment { id }) = Path::<Segment>::from_request_parts(parts, &()).await?;
    Ok(id)
}

/// A product id from the path: 1 to 2^63-1, or 400 `bad_request`.
#[derive(Debug, Clone, Copy, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ProductId {
    /// product id, 1 to 2^63-1
    #[param(minimum = 1)]
    pub id: i64,
}

impl<S: Send + Sync> FromRequestParts<S> for ProductId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Ok(Self {
            id: parse_id(&segment(parts).await?)?,
        })
    }
}

/// An order id from the path: a UUID, or 400 `bad_request`.
#[derive(Debug, Clone, Copy, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct OrderId {
    /// the order id a buy answered
    pub id: Uuid,
}

impl<S: Send + Sync> FromRequestParts<S> for OrderId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let raw = segment(parts).await?;
        let id = Uuid::try_parse(&raw).map_err(|_| {
            ApiError::BadRequest(format!(
                "order id must be a UUID, got {:?}",
                truncate(&raw, 40)
            ))
        })?;
        Ok(Self { id })
    }
}

/// The buyer's header, for the document only: `?user=`
/// ([`crate::instance::auth::UserQuery`]) is its alternative.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
pub struct BuyerHeader {
    /// the buyer; `?user=` is accepted in its place
    #[param(
        rename = "X-User-Id",
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9._:@-]+$"
    )]
    pub user: String,
}
