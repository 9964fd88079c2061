//! Operating a live sale without a reset: units added while buyers race
//! ([`add_stock`]). A reset starts the sale over; these keep every order.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::backends::failure::BackendError;
use crate::model::error::ApiError;
use crate::model::order::Order;
use crate::model::product::operation::RestockRequest;
use crate::model::seam::{Added, Addition};
use crate::sale::Shop;
use crate::sale::memory;
use crate::sale::product_store::{self, Listed};

/// What `POST /admin/products/{id}/restock` answers: the addition in
/// effect.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq, ToSchema)]
pub struct Restocked {
    /// The product.
    pub product_id: i64,
    /// The reset the units were added to.
    pub epoch: i64,
    /// The addition's id: send it again to retry without adding twice.
    pub addition_id: Uuid,
    /// Units the addition put on sale.
    pub units: i64,
    /// True when this id was added before, by an earlier request: nothing
    /// more was added now.
    pub replayed: bool,
}

/// Adds `request.units` to product `id`'s live sale through its strategy
/// (under the product's lock where it has one, so no sale in its
/// critical section writes over the addition), then tells every instance
/// to forget that the product sold out. Nothing is added when the lock
/// is not taken in time (503 `unavailable`) or a reset came in between
/// (503 `busy`).
pub async fn add_stock(
    shop: &Shop,
    id: i64,
    request: RestockRequest,
) -> Result<Restocked, ApiError> {
    let lane = shop.backends.lane.get().await.map_err(ApiError::Backend)?;
    let product = product_store::load(&shop.backends, &mut lane.conn.clone(), id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    let listed = Listed::new(&shop.catalogue, product)?;
    let addition = Addition {
        id: request
            .addition_id
            .unwrap_or_else(|| shop.backends.clock.order_id()),
        units: request.units,
    };
    let order = operator(&listed, &shop.instance, addition.id);
    let ctx = listed.ctx(lane.conn.clone(), &order, &shop.backends);
    let added = listed.strategy.add(&ctx, addition).await?;
    if added == Added::Reset {
        return Err(ApiError::busy(
            "the product was reset during the restock; nothing was added",
        ));
    }
    if added == Added::Now {
        announce(shop, id).await;
        tracing::info!(product = id, units = addition.units, addition = %addition.id, "stock added");
    }
    Ok(Restocked {
        product_id: id,
        epoch: listed.product.epoch,
        addition_id: addition.id,
        units: addition.units,
        replayed: added == Added::Before,
    })
}

/// Every instance forgets the product's sold-out flag, and acknowledges,
/// before the addition answers: a buyer sent after the 200
/// is not refused from memory. Best effort once the units are on sale
/// (the answer says they are): a flag expires by itself
/// (`memory::FLAG_TTL`).
async fn announce(shop: &Shop, id: i64) {
    shop.memory.sold_out.clear(id);
    let told = match shop.backends.redis.get().await {
        Ok(mut conn) => memory::broadcast_restock(&mut conn, id).await,
        Err(error) => Err(BackendError::from(error)),
    };
    if let Err(error) = told {
        tracing::warn!(%error, product = id, "an addition was not announced");
    }
}

/// The order a lock sees as its holder's while an operation holds it:
/// nobody's sale, named by the operation's id.
fn operator(listed: &Listed, instance: &str, id: Uuid) -> Order {
    let product = &listed.product;
    Order {
        order_id: id,
        product_id: product.id,
        epoch: product.epoch,
        user_id: "operator".into(),
        strategy: product.strategy.clone(),
        served_by: instance.to_owned(),
    }
}
