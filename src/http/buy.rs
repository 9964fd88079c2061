//! `POST /stock/{id}/buy`.

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::AppState;
use crate::catalog;
use crate::error::{ApiError, BackendError};
use crate::orders::Order;
use crate::product::{parse_id, truncate};
use crate::strategy::{BuyCtx, Outcome};

/// Longest buyer id accepted.
const MAX_USER_LEN: usize = 64;

/// `?user=` as an alternative to the `X-User-Id` header.
#[derive(Debug, Deserialize)]
pub struct BuyQuery {
    user: Option<String>,
}

/// The 200 body of a sale.
#[derive(Debug, Serialize)]
pub struct Sold {
    order_id: Uuid,
    product_id: i64,
    strategy: String,
    served_by: String,
}

/// Sells one unit to the buyer, under the product's strategy. The body is
/// ignored (JMeter posts an empty form body).
pub async fn buy(
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<BuyQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Json<Sold>, ApiError> {
    let started = std::time::Instant::now();
    let Path(raw_id) = path.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let id = parse_id(&raw_id)?;
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let user = buyer(&headers, query.user)?;
    // After the sale is over, this is nearly every request: answered from
    // memory, no backend touched.
    if app.inner.sold_out.is_sold_out(id) {
        return Err(ApiError::SoldOut);
    }
    // One pool checkout per buy; every command below shares it.
    let pooled = app.redis().await?;
    let redis = (*pooled).clone();
    let product = catalog::load(app.backends(), &mut redis.clone(), id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    let strategy = app.registry().get(&product.strategy).ok_or_else(|| {
        BackendError::Corrupt(format!(
            "product {id} has unknown strategy {}",
            product.strategy
        ))
    })?;
    let order = Order {
        order_id: Uuid::now_v7(),
        product_id: id,
        epoch: product.epoch,
        user_id: user,
        strategy: product.strategy.clone(),
        served_by: app.inner.instance.clone(),
    };
    let ctx = BuyCtx {
        started,
        redis,
        product: &product,
        order: &order,
        backends: app.backends(),
    };
    match strategy.buy(&ctx).await? {
        Outcome::Sold => Ok(Json(Sold {
            order_id: order.order_id,
            product_id: id,
            strategy: order.strategy,
            served_by: order.served_by,
        })),
        Outcome::SoldOut => {
            app.inner.sold_out.mark(id);
            Err(ApiError::SoldOut)
        }
        Outcome::Busy {
            reason,
            retry_after,
        } => Err(ApiError::Busy {
            message: reason.to_owned(),
            retry_after,
        }),
    }
}

/// The buyer id from `X-User-Id` (preferred) or `?user=`: 1 to 64
/// characters of `A-Z a-z 0-9 . _ : @ -`, so it is safe in logs, keys and
/// CSV.
fn buyer(headers: &HeaderMap, from_query: Option<String>) -> Result<String, ApiError> {
    let raw = match headers.get("x-user-id") {
        Some(value) => value
            .to_str()
            .map_err(|_| ApiError::BadRequest("X-User-Id must be printable ASCII".into()))?
            .to_owned(),
        None => from_query.ok_or_else(|| {
            ApiError::BadRequest("a buyer is required: X-User-Id header or ?user=".into())
        })?,
    };
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "._:@-".contains(c);
    if raw.is_empty() || raw.len() > MAX_USER_LEN || !raw.chars().all(valid_char) {
        return Err(ApiError::BadRequest(format!(
            "buyer id must be 1 to {MAX_USER_LEN} characters of A-Z a-z 0-9 . _ : @ -, got {:?}",
            truncate(&raw, 40)
        )));
    }
    Ok(raw)
}
