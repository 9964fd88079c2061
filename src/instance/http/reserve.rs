//! `POST /stock/{id}/reserve`: pre-booking, before a sale opens.

use axum::Json;
use axum::extract::{Extension, State};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::answers::{BuyerUnauthorized, SaleLimited, Unavailable, UnknownProduct};
use super::params::{BuyerHeader, ProductId};
use crate::instance::auth::{Buyer, UserQuery};
use crate::model::error::{ApiError, ErrorBody};
use crate::sale::product_store;

/// A reservation: what the buyer sends back as `X-Reservation` when the
/// sale opens.
#[derive(Debug, Serialize, ToSchema)]
pub struct Reservation {
    /// The product reserved.
    pub product_id: i64,
    /// The buyer it is for; no other buyer can use it.
    pub user: String,
    /// The token: the `X-Reservation` header of the buyer's buy.
    pub token: String,
    /// When the sale opens, in ms since the Unix epoch.
    pub opens_at_ms: u64,
}

/// Reserves a unit's right to buy for the buyer, on a product with
/// `prebooking`, until the sale opens. A reservation is not a unit: the
/// stock still goes to whoever buys first, among the holders. Asking
/// again gives the same token.
#[utoipa::path(
    post,
    path = "/stock/{id}/reserve",
    tag = "sale",
    security((), ("buyer_token" = [])),
    params(
        ProductId,
        BuyerHeader,
        UserQuery,
    ),
    responses(
        (status = 200, description = "reserved: the token to buy with", body = Reservation),
        (status = 400, description = "`bad_request`: a malformed id or buyer, or no buyer", body = ErrorBody),
        BuyerUnauthorized,
        UnknownProduct,
        (status = 409, description = "`not_reservable`: the product takes no reservations, or its sale has opened", body = ErrorBody),
        SaleLimited,
        Unavailable,
    )
)]
pub async fn reserve(
    State(app): State<AppState>,
    Extension(Buyer(user)): Extension<Buyer>,
    ProductId { id }: ProductId,
) -> Result<Json<Reservation>, ApiError> {
    let mut conn = app.redis().await?;
    let product = product_store::load(app.backends(), &mut conn, id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    if !product.settings.prebooking {
        return Err(ApiError::NotReservable(
            "this product takes no reservations: anyone may buy when it opens",
        ));
    }
    if !product.settings.reservable(app.backends().clock.now_ms()) {
        return Err(ApiError::NotReservable(
            "reservations closed when the sale opened",
        ));
    }
    let token = app.shop().reservations.sign(id, product.epoch, &user);
    Ok(Json(Reservation {
        product_id: id,
        user,
        token,
        opens_at_ms: product.settings.opens_at_ms,
    }))
}
