//! `GET /orders/{id}`, `POST /orders/{id}/pay`, `POST /orders/{id}/cancel`:
//! an order's life after the sale, for its buyer only. Each parses, calls
//! the use case ([`crate::orders::life`]) and maps its refusal; a payment or a
//! cancel, once begun, runs to its end if the buyer hangs up.

use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, State};

use super::AppState;
use super::answers::{BackendFailed, BuyerLimited, BuyerUnauthorized, OrderRefused};
use super::detach::to_the_end;
use super::params::{BuyerHeader, OrderId};
use crate::instance::auth::{Buyer, UserQuery};
use crate::model::error::{ApiError, ErrorBody};
use crate::model::order::state::Status;
use crate::orders::life;
use crate::orders::life::{OrderView, Refused};

/// A refusal as the contract answers it.
impl From<Refused> for ApiError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Unknown => Self::UnknownOrder,
            Refused::NotYours => Self::NotYourOrder,
            Refused::Expired => Self::Expired,
            Refused::NotHeld(status) => Self::NotHeld(match status {
                Status::Paid => "paid",
                Status::Expired => "expired",
                Status::Held => "held",
                Status::Sold => "sold outright (the product takes no payment)",
            }),
            Refused::NotYet => Self::Busy {
                message: "the order was just made and is not recorded yet: retry".into(),
                retry_after: Duration::from_secs(1),
            },
            Refused::Failed(error) => error.into(),
        }
    }
}

/// The buyer's order: held (with `pay_by_ms`), paid, expired, or sold.
#[utoipa::path(
    get,
    path = "/orders/{id}",
    tag = "orders",
    security((), ("buyer_token" = [])),
    params(
        OrderId,
        BuyerHeader,
        UserQuery,
    ),
    responses(
        (status = 200, description = "the order", body = OrderView),
        OrderRefused,
        BuyerUnauthorized,
        (status = 403, description = "`not_your_order`: another buyer's order", body = ErrorBody),
        BuyerLimited,
        BackendFailed,
        (status = 503, description = "`busy`: the order was just made and is not recorded yet; `unavailable`: a backend is down", body = ErrorBody),
    )
)]
pub async fn view(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    OrderId { id }: OrderId,
) -> Result<Json<OrderView>, ApiError> {
    Ok(Json(life::view(app.shop(), id, &buyer).await?))
}

/// Pays for a hold before its `pay_by_ms`: the unit is the buyer's. Paying
/// again answers the paid order.
#[utoipa::path(
    post,
    path = "/orders/{id}/pay",
    tag = "orders",
    security((), ("buyer_token" = [])),
    params(
        OrderId,
        ("X-User-Id" = String, Header, min_length = 1, max_length = 64,
         pattern = "^[A-Za-z0-9._:@-]+$",
         description = "the buyer who holds it; `?user=` is accepted in its place"),
        UserQuery,
    ),
    responses(
        (status = 200, description = "paid", body = OrderView),
        OrderRefused,
        BuyerUnauthorized,
        (status = 403, description = "`not_your_order`: another buyer's order; nothing changed", body = ErrorBody),
        BuyerLimited,
        (status = 409, description = "`expired`: the hold expired or was cancelled, nothing was paid; `not_held`: the order was sold outright", body = ErrorBody),
        BackendFailed,
        (status = 503, description = "`busy`: the order was just made and is not recorded yet; `unavailable`: a backend is down", body = ErrorBody),
    )
)]
pub async fn pay(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    OrderId { id }: OrderId,
) -> Result<Json<OrderView>, ApiError> {
    let shop = app.shop().clone();
    let paid = to_the_end(async move { life::pay(&shop, id, &buyer).await }).await?;
    Ok(Json(paid))
}

/// Gives a hold up: its unit goes back on sale. Cancelling again answers
/// the expired order.
#[utoipa::path(
    post,
    path = "/orders/{id}/cancel",
    tag = "orders",
    security((), ("buyer_token" = [])),
    params(
        OrderId,
        ("X-User-Id" = String, Header, min_length = 1, max_length = 64,
         pattern = "^[A-Za-z0-9._:@-]+$",
         description = "the buyer who holds it; `?user=` is accepted in its place"),
        UserQuery,
    ),
    responses(
        (status = 200, description = "cancelled: the order is expired and its unit back on sale", body = OrderView),
        OrderRefused,
        BuyerUnauthorized,
        (status = 403, description = "`not_your_order`: another buyer's order; nothing changed", body = ErrorBody),
        BuyerLimited,
        (status = 409, description = "`not_held`: the order is paid, or was sold outright", body = ErrorBody),
        BackendFailed,
        (status = 503, description = "`busy`: the order was just made and is not recorded yet; `unavailable`: a backend is down, or the product's lock was not acquired", body = ErrorBody),
    )
)]
pub async fn cancel(
    State(app): State<AppState>,
    Extension(Buyer(buyer)): Extension<Buyer>,
    OrderId { id }: OrderId,
) -> Result<Json<OrderView>, ApiError> {
    let shop = app.shop().clone();
    let cancelled = to_the_end(async move { life::cancel(&shop, id, &buyer).await }).await?;
    Ok(Json(cancelled))
}
