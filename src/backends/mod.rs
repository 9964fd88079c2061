//! The connections every layer above uses — Redis, PostgreSQL, the RedLock
//! masters, ZooKeeper, etcd — and [`Footprint`], what a product leaves in them.
//! Handles only: no knowledge of products, locks or strategies.

pub mod clock;
pub mod conn;
pub mod etcd;
pub mod failure;
pub mod flags;
pub mod lane;
pub mod lease;
pub mod master;
pub mod persistence;
pub mod redlock;
pub mod zookeeper;

use std::sync::Arc;
use std::time::Duration;

use crate::backends::failure::BackendError;
use redlock::Master;

/// The connections every strategy may use.
#[derive(Clone)]
pub struct Backends {
    /// Pooled multiplexed connections to the main Redis (its master of
    /// the moment, when it is found through sentinels).
    pub redis: master::RedisPool,
    /// The buy path's one shared connection to the same Redis.
    pub lane: Arc<lane::Lane>,
    /// The same Redis, for what a pool cannot do (Pub/Sub subscriptions,
    /// the order writer's blocking reads).
    pub redis_client: master::MainRedis,
    /// Pooled PostgreSQL connections.
    pub pg: sqlx::PgPool,
    /// Pooled MySQL connections, when configured: the `mysql` store.
    pub mysql: Option<sqlx::MySqlPool>,
    /// The independent RedLock masters.
    pub redlock: Arc<Vec<Master>>,
    /// ZooKeeper session, when configured (renewed after it expires).
    pub zookeeper: Option<zookeeper::ZkSession>,
    /// etcd, when configured.
    pub etcd: Option<etcd_client::Client>,
    /// The clock every instance judges the sale window by ([`clock`]).
    pub clock: Arc<clock::SharedClock>,
}

impl Backends {
    /// The MySQL pool, or why a product stored there cannot be sold.
    pub fn mysql(&self) -> Result<&sqlx::MySqlPool, BackendError> {
        self.mysql.as_ref().ok_or_else(|| {
            BackendError::Unavailable("this instance has no MySQL (--mysql-url)".into())
        })
    }
}

/// What a strategy keeps per product outside the product's own row and
/// stock: lock keys, fencing counters, lock rows, lock nodes. Each lock,
/// store and strategy declares its own, and a reset clears the union, so
/// no list of every strategy's keys is kept by hand anywhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    /// Keys on the main Redis.
    pub redis: Vec<String>,
    /// Keys on every RedLock master.
    pub redlock: Vec<String>,
    /// Rows of the `locks` table, by name.
    pub lock_rows: Vec<String>,
    /// ZooKeeper directories whose children are lock nodes.
    pub lock_nodes: Vec<String>,
    /// etcd key prefixes (lock keys).
    pub etcd_prefixes: Vec<String>,
}

impl Footprint {
    /// Redis keys only.
    pub fn redis(keys: impl IntoIterator<Item = String>) -> Self {
        Self {
            redis: keys.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Both footprints, each entry once.
    pub fn and(mut self, other: Self) -> Self {
        fn merge(into: &mut Vec<String>, from: Vec<String>) {
            for item in from {
                if !into.contains(&item) {
                    into.push(item);
                }
            }
        }
        merge(&mut self.redis, other.redis);
        merge(&mut self.redlock, other.redlock);
        merge(&mut self.lock_rows, other.lock_rows);
        merge(&mut self.lock_nodes, other.lock_nodes);
        merge(&mut self.etcd_prefixes, other.etcd_prefixes);
        self
    }

    /// Deletes the lock rows inside the caller's transaction (the reset's),
    /// so they go with the rest of the product's rows.
    pub async fn clear_rows(&self, tx: &mut sqlx::PgConnection) -> Result<(), BackendError> {
        if !self.lock_rows.is_empty() {
            sqlx::query("DELETE FROM locks WHERE name = ANY($1)")
                .bind(&self.lock_rows)
                .execute(tx)
                .await?;
        }
        Ok(())
    }

    /// Best effort: the keys on every RedLock master, the lock nodes and
    /// etcd's lock keys. A master, ZooKeeper or etcd that is down has
    /// nothing a live holder could be confused by.
    pub async fn clear_remote(&self, backends: &Backends) {
        for master in backends.redlock.iter() {
            for key in &self.redlock {
                let cleared =
                    tokio::time::timeout(Duration::from_millis(200), master.del(key)).await;
                if cleared.is_err() {
                    tracing::debug!(key, "a redlock master did not answer the reset");
                }
            }
        }
        if let Some(session) = &backends.zookeeper
            && let Ok(zk) = session.client().await
        {
            for dir in &self.lock_nodes {
                if let Ok(children) = zk.list_children(dir).await {
                    for child in children {
                        let _ = zk.delete(&format!("{dir}/{child}"), None).await;
                    }
                }
            }
        }
        if let Some(etcd) = &backends.etcd {
            for prefix in &self.etcd_prefixes {
                let options = etcd_client::DeleteOptions::new().with_prefix();
                let cleared = tokio::time::timeout(
                    Duration::from_millis(500),
                    etcd.clone().delete(prefix.as_str(), Some(options)),
                )
                .await;
                if !matches!(cleared, Ok(Ok(_))) {
                    tracing::debug!(prefix, "etcd did not answer the reset");
                }
            }
        }
    }
}
