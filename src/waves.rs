//! Release in waves: a product's stock goes on sale in `waves` shares, one
//! every `wave_every_ms` from the opening (`Settings::waves_due`).
//!
//! The stock the strategies sell from holds only what has been released:
//! a reset puts wave 1's share there, and each later wave is added to it
//! when it comes due. So every strategy, safe or not, sells at most what
//! is on sale, with no change to how it sells. Nobody runs a timer: the
//! first buy an instance sees after a wave came due adds it, in one
//! atomic, idempotent step per counter that carries how many waves it
//! holds (a Redis script that also checks the reset epoch; a conditional
//! `UPDATE` of the row). Instances remember how far they know the release
//! went, so a buy pays that round trip once per wave, not once per sale.

use std::collections::HashMap;
use std::sync::Mutex;

use redis::Script;

use crate::backends::Backends;
use crate::backends::conn::RedisConn;
use crate::error::BackendError;
use crate::product::Product;
use crate::store::RedisCell;
use crate::strategy::{Sells, StockLayout};

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

/// Splits `stock` over `parts` as evenly as possible, the remainder spread
/// one unit each over the first parts: how a reset deals the stock out
/// over counters, and over waves.
pub fn split(stock: i64, parts: usize) -> Vec<i64> {
    let parts_i = parts.max(1) as i64;
    (0..parts_i)
        .map(|i| stock / parts_i + i64::from(i < stock % parts_i))
        .collect()
}

/// Units released to each of `cells` counters through each wave:
/// `through[c][k]` for waves `0..=waves` (`through[c][0]` is 0). Each
/// wave's share is split over the counters as a reset splits the stock.
pub fn through(initial: i64, waves: u32, cells: usize) -> Vec<Vec<i64>> {
    let mut through = vec![vec![0]; cells.max(1)];
    for share in split(initial, waves.max(1) as usize) {
        for (c, part) in split(share, cells.max(1)).into_iter().enumerate() {
            let sum = through[c].last().copied().unwrap_or(0) + part;
            through[c].push(sum);
        }
    }
    through
}

/// The key holding how many waves a Redis counter holds (beside it, in
/// its slot).
pub fn waves_key(cell: &RedisCell) -> String {
    format!("{}:waves", cell.key)
}

/// Adds to a counter what waves `held + 1 ..= due` release, if the counter
/// holds fewer, in this reset. `-1`: the counter belongs to another reset.
static RELEASE: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end \
         local held = tonumber(redis.call('GET', KEYS[2]) or '1') \
         local due = tonumber(ARGV[2]) \
         if held >= due then return 0 end \
         redis.call('INCRBY', KEYS[1], tonumber(ARGV[3 + due]) - tonumber(ARGV[3 + held])) \
         redis.call('SET', KEYS[2], due) \
         return 1",
    )
});

/// Puts every wave due at `now_ms` on sale, unless this instance knows it
/// is there already. On the buy path: without waves, or with the due ones
/// known to be out, it costs a comparison and nothing else.
pub async fn catch_up(
    backends: &Backends,
    redis: &mut RedisConn,
    released: &Released,
    strategy: &dyn Sells,
    product: &Product,
    now_ms: u64,
) -> Result<(), BackendError> {
    let due = product.settings.waves_due(now_ms);
    if product.settings.waves <= 1 || due <= 1 || released.knows(product, due) {
        return Ok(());
    }
    match strategy.layout(product) {
        StockLayout::Redis(cells) => {
            let through = through(product.initial, product.settings.waves, cells.len());
            for (cell, through) in cells.iter().zip(through) {
                let _: i64 = RELEASE
                    .key(&cell.key)
                    .key(waves_key(cell))
                    .key(cell.place.epoch())
                    .arg(product.epoch)
                    .arg(due)
                    .arg(&through)
                    .invoke_async(redis)
                    .await?;
            }
        }
        StockLayout::Postgres => {
            let through = &through(product.initial, product.settings.waves, 1)[0];
            sqlx::query(
                "UPDATE products SET stock = stock + ($4::bigint[])[$3 + 1] - ($4::bigint[])[waves_released + 1], \
                 waves_released = $3 WHERE id = $1 AND epoch = $2 AND waves_released < $3",
            )
            .bind(product.id)
            .bind(product.epoch)
            .bind(due as i32)
            .bind(through)
            .execute(&backends.pg)
            .await?;
        }
        StockLayout::Mysql => {
            // MySQL has no arrays: the cumulative shares as a JSON array,
            // indexed by the waves the row holds (`stock` is assigned
            // first, so it reads the old `waves_released`).
            let through = &through(product.initial, product.settings.waves, 1)[0];
            sqlx::query(
                "UPDATE products SET stock = stock + ? - JSON_EXTRACT(?, CONCAT('$[', waves_released, ']')), \
                 waves_released = ? WHERE id = ? AND epoch = ? AND waves_released < ?",
            )
            .bind(through[due as usize])
            .bind(serde_json::to_string(through).unwrap_or_default())
            .bind(due as i32)
            .bind(product.id)
            .bind(product.epoch)
            .bind(due as i32)
            .execute(backends.mysql()?)
            .await?;
        }
    }
    released.learn(product, due);
    Ok(())
}

/// The units on sale so far (all of them without waves): what the ledger
/// compares the sales and the counters with.
pub async fn on_sale(
    backends: &Backends,
    layout: &StockLayout,
    product: &Product,
) -> Result<i64, BackendError> {
    if product.settings.waves <= 1 {
        return Ok(product.initial);
    }
    let held: Vec<u32> = match layout {
        StockLayout::Redis(cells) => {
            let keys: Vec<String> = cells.iter().map(waves_key).collect();
            let values = backends.redis.get().await?.get_each::<i64>(&keys).await?;
            values
                .into_iter()
                .map(|v| v.map_or(1, |w| w.max(1) as u32))
                .collect()
        }
        StockLayout::Postgres => {
            let held: Option<i32> =
                sqlx::query_scalar("SELECT waves_released FROM products WHERE id = $1")
                    .bind(product.id)
                    .fetch_optional(&backends.pg)
                    .await?;
            vec![held.unwrap_or(1).max(1) as u32]
        }
        StockLayout::Mysql => {
            let held: Option<i32> =
                sqlx::query_scalar("SELECT waves_released FROM products WHERE id = ?")
                    .bind(product.id)
                    .fetch_optional(backends.mysql()?)
                    .await?;
            vec![held.unwrap_or(1).max(1) as u32]
        }
    };
    let through = through(product.initial, product.settings.waves, held.len());
    Ok(held
        .iter()
        .zip(through)
        .map(|(&k, through)| through[(k as usize).min(through.len() - 1)])
        .sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stock_splits_evenly_with_the_remainder_spread() {
        assert_eq!(split(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split(100, 1), vec![100]);
        assert_eq!(split(3, 8), vec![1, 1, 1, 0, 0, 0, 0, 0]);
        assert_eq!(split(10, 4).iter().sum::<i64>(), 10);
    }

    #[test]
    fn every_unit_is_released_once_wave_by_wave() {
        // 10 units, 3 waves (4, 3, 3), over 2 counters.
        let through = through(10, 3, 2);
        assert_eq!(through, vec![vec![0, 2, 4, 6], vec![0, 2, 3, 4]]);
        let last: i64 = through.iter().map(|t| t[3]).sum();
        assert_eq!(last, 10);
        assert_eq!(super::through(7, 1, 1), vec![vec![0, 7]]);
    }
}
