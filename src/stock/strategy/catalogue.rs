//! The strategy catalogue: every strategy this build knows, in catalogue
//! order (unsafe first, then the locks, the database strategies and the
//! atomic ones). Adding a strategy is one file and one line here; see
//! docs/architecture.md for the checklist.

use std::sync::Arc;

use super::group::Grouped;
use super::locked::Locked;
use super::{
    Sells, db_atomic, db_group, db_optimistic, db_pessimistic, db_transaction, naive, redis_group,
    redis_lua, segmented,
};
use crate::model::info::{Info, entry};
use crate::model::product::Product;
use crate::model::product::keys::RedisCell;
use crate::model::seam::Store;
use crate::stock::lock::{
    db_lock_table, etcd, fenced, local_mutex, redis_lock, redisson, redlock, setnx_naive, zookeeper,
};
use crate::stock::store::redis_store::RedisStore;

/// All strategies, by catalogue id.
pub struct Catalogue {
    /// A handful of entries: a linear search by id is cheaper than hashing.
    all: Vec<Arc<dyn Sells>>,
}

impl Catalogue {
    /// Every strategy this build knows.
    pub fn new() -> Self {
        Self {
            all: vec![
                Arc::new(naive::Naive),
                Arc::new(Locked::new(
                    entry("local-mutex"),
                    local_mutex::LocalMutex::default(),
                )),
                Arc::new(Locked::new(entry("setnx-naive"), setnx_naive::SetnxNaive)),
                Arc::new(Locked::new(entry("redis-lock"), redis_lock::RedisLock)),
                Arc::new(Locked::new(
                    entry("redisson"),
                    redisson::Redisson::default(),
                )),
                Arc::new(Locked::new(entry("fenced"), fenced::Fenced)),
                Arc::new(Locked::new(entry("redlock"), redlock::RedLock)),
                Arc::new(Locked::new(entry("zookeeper"), zookeeper::ZooKeeperLock)),
                Arc::new(Locked::new(entry("etcd"), etcd::EtcdLock)),
                Arc::new(Locked::new(
                    entry("db-lock-table"),
                    db_lock_table::DbLockTable,
                )),
                Arc::new(db_transaction::DbTransaction),
                Arc::new(db_pessimistic::DbPessimistic),
                Arc::new(db_optimistic::DbOptimistic),
                Arc::new(db_atomic::DbAtomic),
                Arc::new(Grouped::new(db_group::DbGroup)),
                Arc::new(redis_lua::RedisLua),
                Arc::new(Grouped::new(redis_group::RedisGroup)),
                Arc::new(segmented::Segmented),
            ],
        }
    }

    /// The strategy with this id.
    pub fn get(&self, id: &str) -> Option<&Arc<dyn Sells>> {
        self.all.iter().find(|s| s.info().id == id)
    }

    /// Where `product`'s stock lives under its strategy (a strategy no
    /// longer in the catalogue: the one Redis counter it had).
    pub fn store(&self, product: &Product) -> Arc<dyn Store> {
        match self.get(&product.strategy) {
            Some(strategy) => strategy.store(product),
            None => Arc::new(RedisStore::new(vec![RedisCell::home(product)])),
        }
    }

    /// Every strategy, in catalogue order.
    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn Sells>> {
        self.all.iter()
    }

    /// Catalogue entries, in catalogue order.
    pub fn infos(&self) -> Vec<&'static Info> {
        self.all.iter().map(|s| s.info()).collect()
    }

    /// The ids, for error messages.
    pub fn ids(&self) -> Vec<&'static str> {
        self.all.iter().map(|s| s.info().id).collect()
    }
}

impl Default for Catalogue {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::info::{Expect, Hazard};

    #[test]
    fn ids_are_unique_and_every_entry_declares_its_contention_outcome() {
        let catalogue = Catalogue::new();
        let ids = catalogue.ids();
        // The data lists every strategy once, in catalogue order.
        let listed: Vec<&str> = crate::model::info::entries().iter().map(|i| i.id).collect();
        assert_eq!(ids, listed);
        for (i, id) in ids.iter().enumerate() {
            assert!(!ids[..i].contains(id), "{id} registered twice");
        }
        for info in catalogue.infos() {
            let contention = info.expect(Hazard::Contention);
            assert!(
                contention.is_some(),
                "{} lacks a contention outcome",
                info.id
            );
            // Safe means: never oversells under plain contention.
            if info.safe {
                assert_ne!(contention, Some(Expect::Oversells), "{}", info.id);
            }
        }
    }
}
