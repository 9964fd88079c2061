//! A connection to the main Redis, whatever its shape: one server (at a
//! fixed address or found through sentinels) or a Redis Cluster.
//!
//! Every layer above sends its commands through [`RedisConn`] and never
//! asks which it is: a cluster connection routes each command by its
//! key's slot, and the keys are laid out (one hash tag per product and
//! its order stream, see `product::keys`) so that every script and every
//! pipeline stays in one slot. The few places that must read many slots
//! at once (the ledger, the order writers) send one command per slot, on
//! either shape, and a multiplexed connection pipelines them anyway.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

/// One multiplexed connection: to a server, or to every master of a
/// cluster. Cheap to clone (clones share the sockets).
#[derive(Clone)]
pub enum RedisConn {
    /// One server.
    Single(MultiplexedConnection),
    /// A Redis Cluster: a connection per master, commands routed by slot.
    Cluster(ClusterConnection),
}

impl RedisConn {
    /// The value at each key (`None` when missing), one `GET` per key
    /// sent at once: on a cluster the keys may live on different masters
    /// (an `MGET` may not span slots); on one server the multiplexed
    /// connection pipelines them into one round trip anyway.
    pub async fn get_each<T: redis::FromRedisValue>(
        &self,
        keys: &[String],
    ) -> redis::RedisResult<Vec<Option<T>>> {
        let gets = keys.iter().map(|key| {
            let mut conn = self.clone();
            async move { redis::cmd("GET").arg(key).query_async(&mut conn).await }
        });
        futures::future::join_all(gets).await.into_iter().collect()
    }

    /// Whether this talks to a cluster, where a blocking read can name
    /// the keys of one slot only (the order writer reads differently).
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(conn) => conn.req_packed_command(cmd),
            Self::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(conn) => conn.req_packed_commands(cmd, offset, count),
            Self::Cluster(conn) => conn.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(conn) => conn.get_db(),
            Self::Cluster(conn) => conn.get_db(),
        }
    }
}
