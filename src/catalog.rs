//! Product bookkeeping: loading a product on the buy path and resetting it
//! in every backend.
//!
//! PostgreSQL holds the authoritative row; Redis holds a JSON copy that the
//! buy path reads in one round trip, refilled from PostgreSQL on a miss.

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;

use crate::error::{ApiError, BackendError};
use crate::product::{MAX_STOCK, Product, Settings, keys};
use crate::strategy::{Backends, Registry};

/// The body of `PUT /admin/products/{id}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Units on sale after the reset.
    pub stock: i64,
    /// Strategy id from the registry.
    pub strategy: String,
    /// The strategy's knobs; omitted ones take their defaults.
    #[serde(flatten)]
    pub settings: Settings,
}

impl ResetRequest {
    /// Checks the request against the registry and the settings' ranges.
    pub fn validate(&self, registry: &Registry) -> Result<(), ApiError> {
        if !(0..=MAX_STOCK).contains(&self.stock) {
            return Err(ApiError::BadRequest(format!(
                "stock must be between 0 and {MAX_STOCK}, got {}",
                self.stock
            )));
        }
        if registry.get(&self.strategy).is_none() {
            return Err(ApiError::BadRequest(format!(
                "unknown strategy {:?}; known: {}",
                crate::product::truncate(&self.strategy, 40),
                registry.ids().join(", ")
            )));
        }
        self.settings.validate()
    }
}

/// The product for a buy or a ledger read; `None` if it was never created.
pub async fn load(
    backends: &Backends,
    conn: &mut MultiplexedConnection,
    id: i64,
) -> Result<Option<Product>, BackendError> {
    let cached: Option<String> = conn.get(keys::product(id)).await?;
    if let Some(json) = cached {
        return serde_json::from_str(&json)
            .map(Some)
            .map_err(|e| BackendError::Corrupt(format!("product {id} in redis: {e}")));
    }
    let Some(product) = load_from_db(backends, id).await? else {
        return Ok(None);
    };
    // Refill the cache only if no reset wrote a newer copy meanwhile.
    let _: bool = conn.set_nx(keys::product(id), to_json(&product)).await?;
    Ok(Some(product))
}

/// The authoritative row.
async fn load_from_db(backends: &Backends, id: i64) -> Result<Option<Product>, BackendError> {
    let row: Option<ProductRow> =
        sqlx::query_as("SELECT id, strategy, settings, initial, epoch FROM products WHERE id = $1")
            .bind(id)
            .fetch_optional(&backends.pg)
            .await?;
    Ok(row.map(into_product))
}

/// A `products` row as selected by [`load_from_db`] and [`all`].
type ProductRow = (i64, String, sqlx::types::Json<Settings>, i64, i64);

fn into_product((id, strategy, settings, initial, epoch): ProductRow) -> Product {
    Product {
        id,
        strategy,
        settings: settings.0,
        initial,
        epoch,
    }
}

/// Every product, ascending by id, from the authoritative rows.
pub async fn all(backends: &Backends) -> Result<Vec<Product>, BackendError> {
    let rows: Vec<ProductRow> =
        sqlx::query_as("SELECT id, strategy, settings, initial, epoch FROM products ORDER BY id")
            .fetch_all(&backends.pg)
            .await?;
    Ok(rows.into_iter().map(into_product).collect())
}

/// Creates or resets a product: a new epoch, fresh stock in both stores,
/// its orders deleted and its locks cleared.
///
/// Orders of the old epoch still in the stream are written later by the
/// order writer but never counted: the ledger filters on the epoch.
pub async fn reset(
    backends: &Backends,
    id: i64,
    request: &ResetRequest,
) -> Result<Product, BackendError> {
    let mut tx = backends.pg.begin().await?;
    let epoch: i64 = sqlx::query_scalar(
        "INSERT INTO products (id, strategy, settings, initial, stock, version, epoch, reset_at) \
         VALUES ($1, $2, $3, $4, $4, 0, 1, now()) \
         ON CONFLICT (id) DO UPDATE SET strategy = EXCLUDED.strategy, settings = EXCLUDED.settings, \
           initial = EXCLUDED.initial, stock = EXCLUDED.stock, version = 0, \
           epoch = products.epoch + 1, reset_at = now() \
         RETURNING epoch",
    )
    .bind(id)
    .bind(&request.strategy)
    .bind(sqlx::types::Json(request.settings))
    .bind(request.stock)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM orders WHERE product_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;

    let product = Product {
        id,
        strategy: request.strategy.clone(),
        settings: request.settings,
        initial: request.stock,
        epoch,
    };
    let mut conn = backends.redis.get().await?;
    redis::pipe()
        .atomic()
        .set(keys::stock(id), request.stock)
        .ignore()
        .set(keys::epoch(id), epoch)
        .ignore()
        .set(keys::product(id), to_json(&product))
        .ignore()
        .del(keys::lock(id))
        .ignore()
        .query_async::<()>(&mut conn)
        .await?;
    Ok(product)
}

fn to_json(product: &Product) -> String {
    serde_json::to_string(product).expect("a product always serializes")
}
