//! The product store: loading a product on the buy path and resetting it
//! in every backend.
//!
//! PostgreSQL holds the authoritative row; Redis holds a JSON copy,
//! refilled from PostgreSQL on a miss; each instance keeps its own copy of
//! that ([`ProductCache`]), with its strategy and store resolved
//! ([`Listed`]), so a buy reads its product without a round trip.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;

use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::error::Invalid;
use crate::model::order::Order;
use crate::model::product::keys::Place;
use crate::model::product::shares::through;
use crate::model::product::{Product, Recipe, ResetRequest, Settings, keys, truncate};
use crate::model::seam::{BuyCtx, Store};
use crate::model::telemetry::BuyMetrics;
use crate::sale::guard::PathSlot;
use crate::stock::strategy::{Catalogue, Sells};

/// Checks a reset request: its ranges, that the catalogue knows its
/// strategy, and that the strategy takes its recipe.
pub fn validate(request: &ResetRequest, catalogue: &Catalogue) -> Result<(), Invalid> {
    let Some(strategy) = catalogue.get(&request.strategy) else {
        return Err(Invalid(format!(
            "unknown strategy {:?}; known: {}",
            truncate(&request.strategy, 40),
            catalogue.ids().join(", ")
        )));
    };
    let recipe = request.settings.recipe;
    let info = strategy.info();
    if recipe != Recipe::default() && !info.recipes.contains(&recipe) {
        return Err(Invalid(format!(
            "{} takes no recipe {:?}; only {} do",
            info.id,
            recipe.as_str(),
            catalogue
                .all()
                .filter(|s| s.info().recipes.contains(&recipe))
                .map(|s| s.info().id)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    if let Some(store) = request.settings.store
        && !info.stores.contains(&store)
    {
        return Err(Invalid(format!(
            "{} cannot sell from store {:?}; it takes {}",
            info.id,
            store.as_str(),
            info.stores
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    request.validate()
}

/// How long an instance trusts its copy of a product without hearing of a
/// reset. Resets are broadcast and acknowledged before they return (the
/// `soldout` module), and a lost subscription forgets every copy, so this
/// only bounds what a lost message could cost.
pub const CACHE_TTL: Duration = Duration::from_secs(2);

/// A product as the buy path sells it: resolved once per reset, so a buy
/// looks up neither its strategy nor its store.
pub struct Listed {
    /// The product, as of its last reset.
    pub product: Product,
    /// Its strategy, from the catalogue.
    pub strategy: Arc<dyn Sells>,
    /// Where its stock and orders live, laid out as its strategy sells.
    pub store: Arc<dyn Store>,
    /// Its strategy's buy counters and latency histogram.
    pub metrics: BuyMetrics,
    /// Its backend path's guards, found on its first buy.
    pub guard: PathSlot,
}

impl Listed {
    /// `product` with its strategy and store; an error for a strategy the
    /// catalogue does not have (a product written by another version).
    pub fn new(catalogue: &Catalogue, product: Product) -> Result<Self, BackendError> {
        let strategy = catalogue.get(&product.strategy).cloned().ok_or_else(|| {
            BackendError::Corrupt(format!(
                "product {} has unknown strategy {}",
                product.id, product.strategy
            ))
        })?;
        let store = strategy.store(&product);
        let metrics = BuyMetrics::of(strategy.info().id);
        Ok(Self {
            product,
            strategy,
            store,
            metrics,
            guard: PathSlot::new(),
        })
    }

    /// A context for an operation on this product started now (a
    /// restock, a repair, a give-back): the buy path's own seam, so each
    /// strategy runs them under the same lock and layout as its buys.
    pub fn ctx<'a>(
        &'a self,
        redis: RedisConn,
        order: &'a Order,
        backends: &'a Backends,
    ) -> BuyCtx<'a> {
        BuyCtx {
            redis,
            started: Instant::now(),
            product: &self.product,
            store: self.store.as_ref(),
            order,
            backends,
        }
    }
}

/// This instance's copies of the products it sells. Before the cache,
/// every buy read its product from Redis: a round trip per sale for
/// settings that change only on a reset.
#[derive(Default)]
pub struct ProductCache {
    /// A std mutex: held for one map operation, never across an await.
    products: Mutex<HashMap<i64, (Instant, Arc<Listed>)>>,
    /// Bumped by every forget: a copy read before a reset must not be
    /// stored after the reset forgot the old one.
    forgets: AtomicU64,
}

/// A cache miss: what [`ProductCache::put`] needs to know whether a reset
/// came in between.
pub struct Miss(u64);

impl ProductCache {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (Instant, Arc<Listed>)>> {
        self.products.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The fresh copy of product `id`, or the [`Miss`] to fill it with.
    pub fn get(&self, id: i64) -> Result<Arc<Listed>, Miss> {
        let miss = Miss(self.forgets.load(Ordering::Acquire));
        match self.map().get(&id) {
            Some((since, product)) if since.elapsed() < CACHE_TTL => Ok(product.clone()),
            _ => Err(miss),
        }
    }

    /// Keeps `product`, unless a reset was heard since the `miss`.
    pub fn put(&self, miss: Miss, listed: Arc<Listed>) {
        let mut map = self.map();
        if self.forgets.load(Ordering::Acquire) == miss.0 {
            map.insert(listed.product.id, (Instant::now(), listed));
        }
    }

    /// Forgets product `id` (it was reset).
    pub fn forget(&self, id: i64) {
        let mut map = self.map();
        self.forgets.fetch_add(1, Ordering::AcqRel);
        map.remove(&id);
    }

    /// Forgets every product (resets may have been missed).
    pub fn forget_all(&self) {
        let mut map = self.map();
        self.forgets.fetch_add(1, Ordering::AcqRel);
        map.clear();
    }
}

/// The product for a buy after [`ProductCache::get`] missed: [`load`]'s,
/// then kept unless a reset came in between.
pub async fn fill(
    cache: &ProductCache,
    miss: Miss,
    (backends, catalogue): (&Backends, &Catalogue),
    conn: &mut RedisConn,
    id: i64,
) -> Result<Option<Arc<Listed>>, BackendError> {
    let Some(product) = load(backends, conn, id).await? else {
        return Ok(None);
    };
    let listed = Arc::new(Listed::new(catalogue, product)?);
    cache.put(miss, listed.clone());
    Ok(Some(listed))
}

/// The product for a buy or a ledger read; `None` if it was never created.
pub async fn load(
    backends: &Backends,
    conn: &mut RedisConn,
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

/// A product's settings as rewritten by [`rewrite_settings`].
pub struct Rewritten {
    /// The product now.
    pub product: Product,
    /// Whether anything changed (else nothing was written).
    pub changed: bool,
}

/// Rewrites the settings of reset `epoch` of product `id` as `change`
/// says (`None`: leave them), in the authoritative row and in Redis's
/// copy, without a reset: its stock, orders and epoch stay. `Ok(None)`:
/// the product is gone or at another reset (one came in between).
///
/// `change` sees the locked row, not a copy. The row stays locked until
/// Redis holds the new copy, so a reset, which locks the row first,
/// writes its copy after this one; and `epoch` is the one the caller
/// read from Redis's copy, so a reset that committed but has not yet
/// written its copy (which this one would precede) is caught here.
pub async fn rewrite_settings<E: From<BackendError>>(
    backends: &Backends,
    id: i64,
    epoch: i64,
    change: impl FnOnce(&Product) -> Result<Option<Settings>, E>,
) -> Result<Option<Rewritten>, E> {
    let mut tx = backends.pg.begin().await.map_err(BackendError::from)?;
    let row: Option<ProductRow> = sqlx::query_as(concat!(select_one!(), " FOR UPDATE"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(BackendError::from)?;
    let Some(mut product) = row.map(into_product).filter(|p| p.epoch == epoch) else {
        return Ok(None);
    };
    let Some(settings) = change(&product)? else {
        return Ok(Some(Rewritten {
            product,
            changed: false,
        }));
    };
    product.settings = settings;
    write_settings(backends, tx, &product).await?;
    Ok(Some(Rewritten {
        product,
        changed: true,
    }))
}

/// [`rewrite_settings`]'s writes, in the transaction that locked the row.
async fn write_settings(
    backends: &Backends,
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    product: &Product,
) -> Result<(), BackendError> {
    sqlx::query("UPDATE products SET settings = $2 WHERE id = $1")
        .bind(product.id)
        .bind(sqlx::types::Json(product.settings))
        .execute(&mut *tx)
        .await?;
    let mut conn = backends.redis.get().await?;
    let () = conn
        .set(keys::product(product.id), to_json(product))
        .await?;
    if let Err(error) = tx.commit().await {
        // Whether it committed is unknown: the copy goes, and is refilled
        // from the row, whichever settings it holds.
        let _: Result<(), _> = conn.del(keys::product(product.id)).await;
        return Err(error.into());
    }
    Ok(())
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
    let mut settings = request.settings;
    if settings.waves > 1 && settings.opens_at_ms == 0 {
        // Waves are counted from the opening: without one, from now.
        settings.opens_at_ms = backends.clock.now_ms();
    }
    let first_wave = through(request.stock, settings.waves, 1)[0][1];
    let mut tx = backends.pg.begin().await?;
    // The row as it was, locked until the reset commits: its footprint
    // (say, more segments than the new settings have) goes too.
    let old: Option<ProductRow> = sqlx::query_as(concat!(select_one!(), " FOR UPDATE"))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
    let epoch: i64 = sqlx::query_scalar(
        "INSERT INTO products (id, strategy, settings, initial, stock, version, epoch, fence, reset_at, waves_released) \
         VALUES ($1, $2, $3, $4, $5, 0, 1, 0, now(), 1) \
         ON CONFLICT (id) DO UPDATE SET strategy = EXCLUDED.strategy, settings = EXCLUDED.settings, \
           initial = EXCLUDED.initial, stock = EXCLUDED.stock, version = 0, fence = 0, \
           epoch = products.epoch + 1, reset_at = now(), waves_released = 1 \
         RETURNING epoch",
    )
    .bind(id)
    .bind(&request.strategy)
    .bind(sqlx::types::Json(settings))
    .bind(request.stock)
    .bind(first_wave)
    .fetch_one(&mut *tx)
    .await?;
    let product = Product {
        id,
        strategy: request.strategy.clone(),
        settings,
        initial: request.stock,
        epoch,
    };
    let stale = footprint(catalogue, old.map(into_product).iter().chain([&product]));
    for delete in [
        "DELETE FROM orders WHERE product_id = $1",
        "DELETE FROM buyer_counts WHERE product_id = $1",
        "DELETE FROM additions WHERE product_id = $1",
    ] {
        sqlx::query(delete).bind(id).execute(&mut *tx).await?;
    }
    stale.clear_rows(&mut tx).await?;
    // The store's part before PostgreSQL commits: if it fails, the reset
    // fails whole and PostgreSQL keeps the old epoch.
    let store = strategy.store(&product);
    store.lay_out(backends, &product, &stale).await?;
    tx.commit().await?;
    reset_redis(backends, store.as_ref(), &product, &stale).await?;
    stale.clear_remote(backends).await;
    Ok(product)
}

/// The reset's part in Redis, once PostgreSQL has committed: one atomic
/// pipeline per cluster slot (no MULTI spans two), each place's stale
/// keys deleted, its counters and its copy of the epoch set. The home's
/// goes last, with the product's JSON, which is what an instance that
/// missed the reset broadcast reads.
async fn reset_redis(
    backends: &Backends,
    store: &dyn Store,
    product: &Product,
    stale: &Footprint,
) -> Result<(), BackendError> {
    let (id, epoch) = (product.id, product.epoch);
    let home = Place::home(id).slot();
    let mut by_slot: BTreeMap<u16, redis::Pipeline> = BTreeMap::new();
    fn pipe_of(by_slot: &mut BTreeMap<u16, redis::Pipeline>, slot: u16) -> &mut redis::Pipeline {
        by_slot.entry(slot).or_insert_with(|| {
            let mut pipe = redis::pipe();
            pipe.atomic();
            pipe
        })
    }
    for key in &stale.redis {
        pipe_of(&mut by_slot, keys::slot_of_key(key))
            .del(key)
            .ignore();
    }
    // Wave 1's share (the whole stock without waves), split over the
    // store's Redis counters, if it has any; later waves are added when
    // they come due.
    let cells = store.cells();
    let shares = through(product.initial, product.settings.waves, cells.len());
    for (cell, through) in cells.iter().zip(shares) {
        let pipe = pipe_of(&mut by_slot, cell.place.slot());
        pipe.set(&cell.key, through[1])
            .ignore()
            .set(cell.place.epoch(), epoch)
            .ignore();
        if product.settings.waves > 1 {
            pipe.set(cell.waves_key(), 1).ignore();
        }
    }
    pipe_of(&mut by_slot, home)
        .set(keys::epoch(id), epoch)
        .ignore()
        .set(keys::product(id), to_json(product))
        .ignore();
    let last = by_slot.remove(&home);
    let mut conn = backends.redis.get().await?;
    for pipe in by_slot.values().chain(&last) {
        pipe.query_async::<()>(&mut *conn).await?;
    }
    Ok(())
}

/// Everything any strategy may keep for these versions of a product: each
/// strategy's footprint (its store's counters among it), and the
/// product's buyer counts. Every strategy, not only the product's: a product that changes
/// strategy must not inherit the last one's locks.
fn footprint<'a>(catalogue: &Catalogue, versions: impl Iterator<Item = &'a Product>) -> Footprint {
    let mut all = Footprint::default();
    for product in versions {
        all = all.and(Footprint::redis([keys::buyers(product.id)]));
        for strategy in catalogue.all() {
            all = all.and(strategy.footprint(product));
        }
    }
    all
}

fn to_json(product: &Product) -> String {
    serde_json::to_string(product).expect("a product always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn product(id: i64, epoch: i64) -> Arc<Listed> {
        let product = Product {
            id,
            strategy: "redis-lua".into(),
            settings: Settings::default(),
            initial: 10,
            epoch,
        };
        Arc::new(Listed::new(&Catalogue::new(), product).expect("redis-lua is catalogued"))
    }

    #[test]
    fn a_copy_read_before_a_reset_is_not_kept_after_it() {
        let cache = ProductCache::default();
        let Err(miss) = cache.get(1) else {
            panic!("an empty cache hit")
        };
        cache.put(miss, product(1, 1));
        assert_eq!(cache.get(1).ok().map(|l| l.product.epoch), Some(1));
        let Err(stale) = cache.get(2) else {
            panic!("product 2 was never kept")
        };
        cache.forget(1);
        assert!(cache.get(1).is_err());
        cache.put(stale, product(2, 1));
        assert!(cache.get(2).is_err(), "kept a copy read before the reset");
        let Err(miss) = cache.get(2) else {
            panic!("forgotten")
        };
        cache.put(miss, product(2, 2));
        cache.forget_all();
        assert!(cache.get(2).is_err());
    }
}
