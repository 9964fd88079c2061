//! Release in waves: a product's stock goes on sale in `waves` shares, one
//! every `wave_every_ms` from the opening (`Settings::waves_due`).
//!
//! The stock the strategies sell from holds only what has been released:
//! a reset puts wave 1's share there, and each later wave is added to it
//! when it comes due. So every strategy, safe or not, sells at most what
//! is on sale, with no change to how it sells. Nobody runs a timer: the
//! first buy an instance sees after a wave came due adds it, in one
//! atomic, idempotent step per counter that carries how many waves it
//! holds ([`crate::model::seam::Store::release`]: a Redis script that also
//! checks the reset epoch; a conditional `UPDATE` of the row). Instances
//! remember how far they know the release went, so a buy pays that round
//! trip once per wave, not once per sale.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::backends::Backends;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::model::product::Product;
use crate::model::product::shares::through;
use crate::model::seam::Store;

/// How many waves each product's counters hold, as this instance last
/// made or saw them: (epoch, waves).
#[derive(Default)]
pub struct Released {
    /// A std mutex: held for one map operation, never across an await.
    known: Mutex<HashMap<i64, (i64, u32)>>,
}

impl Released {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<i64, (i64, u32)>> {
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this instance knows `due` waves of this reset are released.
    fn knows(&self, product: &Product, due: u32) -> bool {
        self.map()
            .get(&product.id)
            .is_some_and(|&(epoch, waves)| epoch == product.epoch && waves >= due)
    }

    fn learn(&self, product: &Product, due: u32) {
        self.map().insert(product.id, (product.epoch, due));
    }

    /// Forgets product `id` (it was reset).
    pub fn forget(&self, id: i64) {
        self.map().remove(&id);
    }
}

/// Puts every wave due at `now_ms` on sale, unless this instance knows it
/// is there already. On the buy path: without waves, or with the due ones
/// known to be out, it costs a comparison and nothing else.
pub async fn catch_up(
    backends: &Backends,
    redis: &mut RedisConn,
    released: &Released,
    store: &dyn Store,
    product: &Product,
    now_ms: u64,
) -> Result<(), BackendError> {
    let due = product.settings.waves_due(now_ms);
    if product.settings.waves <= 1 || due <= 1 || released.knows(product, due) {
        return Ok(());
    }
    store.release(backends, redis, product, due).await?;
    released.learn(product, due);
    Ok(())
}

/// The units on sale so far (all of them without waves): what the ledger
/// compares the sales and the counters with.
pub async fn on_sale(
    backends: &Backends,
    store: &dyn Store,
    product: &Product,
) -> Result<i64, BackendError> {
    if product.settings.waves <= 1 {
        return Ok(product.initial);
    }
    let held = store.waves_held(backends, product).await?;
    let through = through(product.initial, product.settings.waves, held.len());
    Ok(held
        .iter()
        .zip(through)
        .map(|(&k, through)| through[(k as usize).min(through.len() - 1)])
        .sum())
}
