//! The product store: loading a product on the buy path and resetting it
//! in every backend.
//!
//! PostgreSQL holds the authoritative row; Redis holds a JSON copy that the
//! buy path reads in one round trip, refilled from PostgreSQL on a miss.

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;

use crate::backends::{Backends, Footprint};
use crate::error::{BackendError, Invalid};
use crate::product::{Product, ResetRequest, Settings, keys, truncate};
use crate::strategy::{Catalogue, StockLayout};

/// Checks a reset request: its ranges, and that the catalogue knows its
/// strategy.
pub fn validate(request: &ResetRequest, catalogue: &Catalogue) -> Result<(), Invalid> {
    if catalogue.get(&request.strategy).is_none() {
        return Err(Invalid(format!(
            "unknown strategy {:?}; known: {}",
            truncate(&request.strategy, 40),
            catalogue.ids().join(", ")
        )));
    }
    request.validate()
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
    let row: Option<ProductRow> = sqlx::query_as(SELECT_ONE)
        .bind(id)
        .fetch_optional(&backends.pg)
        .await?;
    Ok(row.map(into_product))
}

/// One product's row, as [`ProductRow`] wants it (a macro, so that the
/// reset's locking read can extend it at compile time).
macro_rules! select_one {
    () => {
        "SELECT id, strategy, settings, initial, epoch FROM products WHERE id = $1"
    };
}
const SELECT_ONE: &str = select_one!();

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
/// strategy wants it, its orders deleted and, in every backend, whatever
/// any strategy keeps for it (each declares its [`Footprint`]), so a
/// product that changes strategy or segments starts clean.
///
/// Orders of the old epoch still in the stream are written later by the
/// order writer but never counted: the ledger filters on the epoch.
pub async fn reset(
    backends: &Backends,
    catalogue: &Catalogue,
    id: i64,
    request: &ResetRequest,
) -> Result<Product, BackendError> {
    let strategy = catalogue
        .get(&request.strategy)
        .ok_or_else(|| BackendError::Corrupt(format!("unknown strategy {}", request.strategy)))?;
    let mut tx = backends.pg.begin().await?;
    // The row as it was, locked until the reset commits: its footprint
    // (say, more segments than the new settings have) goes too.
    let old: Option<ProductRow> = sqlx::query_as(concat!(select_one!(), " FOR UPDATE"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
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
    let product = Product {
        id,
        strategy: request.strategy.clone(),
        settings: request.settings,
        initial: request.stock,
        epoch,
    };
    let stale = footprint(catalogue, old.map(into_product).iter().chain([&product]));
    for delete in [
        "DELETE FROM orders WHERE product_id = $1",
        "DELETE FROM buyer_counts WHERE product_id = $1",
    ] {
        sqlx::query(delete).bind(id).execute(&mut *tx).await?;
    }
    stale.clear_rows(&mut tx).await?;
    tx.commit().await?;

    let mut pipe = redis::pipe();
    pipe.atomic();
    stale.clear_redis(&mut pipe);
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
    stale.clear_remote(backends).await;
    Ok(product)
}

/// Everything any strategy may keep for these versions of a product: each
/// strategy's footprint and Redis stock keys, and the product's buyer
/// counts. Every strategy, not only the product's: a product that changes
/// strategy must not inherit the last one's locks.
fn footprint<'a>(catalogue: &Catalogue, versions: impl Iterator<Item = &'a Product>) -> Footprint {
    let mut all = Footprint::default();
    for product in versions {
        all = all.and(Footprint::redis([keys::buyers(product.id)]));
        for strategy in catalogue.all() {
            all = all.and(strategy.footprint(product));
            if let StockLayout::Redis(stock_keys) = strategy.layout(product) {
                all = all.and(Footprint::redis(stock_keys));
            }
        }
    }
    all
}

/// Splits `stock` over `parts` as evenly as possible, the remainder spread
/// one unit each over the first parts.
pub fn split(stock: i64, parts: usize) -> Vec<i64> {
    let parts_i = parts.max(1) as i64;
    (0..parts_i)
        .map(|i| stock / parts_i + i64::from(i < stock % parts_i))
        .collect()
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
