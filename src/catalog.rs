//! Product bookkeeping: loading a product on the buy path and resetting it
//! in every backend.
//!
//! PostgreSQL holds the authoritative row; Redis holds a JSON copy that the
//! buy path reads in one round trip, refilled from PostgreSQL on a miss.

use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use serde::Deserialize;

use crate::error::{ApiError, BackendError};
use crate::lock;
use crate::product::{MAX_SEGMENTS, MAX_STOCK, Product, Settings, keys};
use crate::strategy::{Backends, Registry, StockLayout};

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

/// Creates or resets a product: a new epoch, fresh stock laid out as its
/// strategy wants it, its orders deleted and its locks cleared in every
/// backend.
///
/// Orders of the old epoch still in the stream are written later by the
/// order writer but never counted: the ledger filters on the epoch.
pub async fn reset(
    backends: &Backends,
    registry: &Registry,
    id: i64,
    request: &ResetRequest,
) -> Result<Product, BackendError> {
    let strategy = registry
        .get(&request.strategy)
        .ok_or_else(|| BackendError::Corrupt(format!("unknown strategy {}", request.strategy)))?;
    let mut tx = backends.pg.begin().await?;
    let epoch: i64 = sqlx::query_scalar(
        "INSERT INTO products (id, strategy, settings, initial, stock, version, epoch, fence, reset_at) \
         VALUES ($1, $2, $3, $4, $4, 0, 1, 0, now()) \
         ON CONFLICT (id) DO UPDATE SET strategy = EXCLUDED.strategy, settings = EXCLUDED.settings, \
           initial = EXCLUDED.initial, stock = EXCLUDED.stock, version = 0, fence = 0, \
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
    sqlx::query("DELETE FROM buyer_counts WHERE product_id = $1")
        .bind(id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM locks WHERE name = $1")
        .bind(lock::db_lock_table::lock_name(id))
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
    let mut pipe = redis::pipe();
    pipe.atomic();
    // Every key any strategy may have used for this product goes, so a
    // product that changes strategy starts clean.
    pipe.del(keys::stock(id)).ignore();
    pipe.del(keys::lock(id)).ignore();
    pipe.del(keys::fence(id)).ignore();
    pipe.del(keys::fence_seen(id)).ignore();
    pipe.del(keys::buyers(id)).ignore();
    for k in 0..MAX_SEGMENTS {
        pipe.del(keys::segment(id, k)).ignore();
        pipe.del(keys::segment_lock(id, k)).ignore();
    }
    if let StockLayout::Redis(stock_keys) = strategy.layout(&product) {
        for (key, share) in stock_keys
            .iter()
            .zip(split(request.stock, stock_keys.len()))
        {
            pipe.set(key, share).ignore();
        }
    }
    pipe.set(keys::epoch(id), epoch).ignore();
    pipe.set(keys::product(id), to_json(&product)).ignore();
    let mut conn = backends.redis.get().await?;
    pipe.query_async::<()>(&mut *conn).await?;
    clear_remote_locks(backends, id).await;
    Ok(product)
}

/// Splits `stock` over `parts` as evenly as possible, the remainder spread
/// one unit each over the first parts.
pub fn split(stock: i64, parts: usize) -> Vec<i64> {
    let parts_i = parts.max(1) as i64;
    (0..parts_i)
        .map(|i| stock / parts_i + i64::from(i < stock % parts_i))
        .collect()
}

/// Best effort: the lock key on every RedLock master and the product's
/// ZooKeeper lock nodes. A master or ZooKeeper that is down has nothing a
/// live holder could be confused by.
async fn clear_remote_locks(backends: &Backends, id: i64) {
    for master in backends.redlock.iter() {
        let cleared =
            tokio::time::timeout(Duration::from_millis(200), master.del(&keys::lock(id))).await;
        if cleared.is_err() {
            tracing::debug!(product = id, "a redlock master did not answer the reset");
        }
    }
    if let Some(zk) = &backends.zookeeper {
        let dir = lock::zookeeper::lock_dir(id);
        if let Ok(children) = zk.list_children(&dir).await {
            for child in children {
                let _ = zk.delete(&format!("{dir}/{child}"), None).await;
            }
        }
    }
}

fn to_json(product: &Product) -> String {
    serde_json::to_string(product).expect("a product always serializes")
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn stock_splits_evenly_with_the_remainder_spread() {
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(100, 1), vec![100]);
        assert_eq!(split(3, 8), vec![1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(split(10, 4).iter().sum::<i64>(), 10);
    }
}
