//! The main Redis (stock, locks, the order stream): at one fixed address,
//! or wherever Redis Sentinel says the master is now.
//!
//! With sentinels, every *new* connection asks them for the master
//! (`redis::sentinel::SentinelClient`, which also checks with `ROLE` that
//! the server it names agrees it is a master), so everything that
//! reconnects follows a promotion: the pool (a dead connection fails its
//! checkout and is replaced), the order writer and the Pub/Sub listeners
//! (they reconnect after any error, `READONLY` included).
//!
//! A connection that is alive but to a server since demoted to a replica
//! would keep answering — reads from a stale copy, writes refused with
//! `READONLY`. Sentinel itself rarely leaves one: when it turns the old
//! master into a replica it also kills that server's clients (`CLIENT
//! KILL`, normal and Pub/Sub alike; measured here), and they reconnect.
//! A demotion by other hands (an operator's `REPLICAOF`) kills nobody, so
//! in this mode the pool's checkout asks `ROLE` instead of `PING` — one
//! round trip either way — and drops a connection whose server is no
//! longer the master.
//!
//! The buy path does not use the pool: it shares one connection
//! ([`super::lane::Lane`]), retired on a broken connection or a
//! `READONLY` answer, so it too follows a promotion, from the next buy on.
//! A buy in flight when its master dies fails with it instead of carrying
//! on against the new master.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use redis::aio::{ConnectionLike, MultiplexedConnection, PubSub};
use redis::sentinel::{SentinelClient, SentinelServerType};
use redis::{AsyncConnectionConfig, RedisError, RedisResult};

/// How an instance reaches the main Redis: a `redis::Client`-like handle
/// whose connections go to the master of the moment. Cheap to clone.
#[derive(Clone)]
pub enum MainRedis {
    /// One address (`SECKILL_REDIS_URL`), as before sentinels existed here.
    Fixed(redis::Client),
    /// Whichever server the sentinels name as master when a connection is
    /// made (`SECKILL_REDIS_SENTINELS`). An async mutex: the client caches
    /// its connections to the sentinels and needs `&mut` to ask them, and
    /// is held across that await; lookups are rare (new connections only).
    Sentinel(Arc<tokio::sync::Mutex<SentinelClient>>),
}

impl MainRedis {
    /// The Redis at `url`.
    pub fn fixed(url: &str) -> RedisResult<Self> {
        Ok(Self::Fixed(redis::Client::open(url)?))
    }

    /// The master the sentinels at `sentinels` (`host:port` or
    /// `redis://…` URLs) know as `master_name`.
    pub fn sentinel(sentinels: &[String], master_name: &str) -> RedisResult<Self> {
        let urls: Vec<String> = sentinels
            .iter()
            .map(|s| {
                if s.contains("://") {
                    s.clone()
                } else {
                    format!("redis://{s}")
                }
            })
            .collect();
        let client = SentinelClient::build(
            urls,
            master_name.to_owned(),
            None,
            SentinelServerType::Master,
        )?;
        Ok(Self::Sentinel(Arc::new(tokio::sync::Mutex::new(client))))
    }

    /// A client for the master now.
    async fn client(&self) -> RedisResult<redis::Client> {
        match self {
            Self::Fixed(client) => Ok(client.clone()),
            Self::Sentinel(sentinels) => sentinels.lock().await.async_get_client().await,
        }
    }

    /// A new multiplexed connection to the master now.
    pub async fn get_multiplexed_async_connection(&self) -> RedisResult<MultiplexedConnection> {
        self.client()
            .await?
            .get_multiplexed_async_connection()
            .await
    }

    /// The same, with `config`'s timeouts.
    pub async fn get_multiplexed_async_connection_with_config(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        self.client()
            .await?
            .get_multiplexed_async_connection_with_config(config)
            .await
    }

    /// A new multiplexed connection to the master now, speaking
    /// `protocol`, with `config`'s timeouts and push sender (RESP3 only).
    pub async fn connect(
        &self,
        protocol: redis::ProtocolVersion,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<MultiplexedConnection> {
        let info = self.client().await?.get_connection_info().clone();
        let settings = info.redis_settings().clone().set_protocol(protocol);
        redis::Client::open(info.set_redis_settings(settings))?
            .get_multiplexed_async_connection_with_config(config)
            .await
    }

    /// A new Pub/Sub connection to the master now.
    pub async fn get_async_pubsub(&self) -> RedisResult<PubSub> {
        self.client().await?.get_async_pubsub().await
    }

    /// A pool of `size` connections to the master. A checkout waits at
    /// most 5 s for a free connection and a new connection may take 2 s
    /// (a sentinel lookup included).
    pub fn pool(&self, size: usize) -> anyhow::Result<RedisPool> {
        let manager = match self {
            Self::Fixed(client) => Manager::Fixed(
                deadpool_redis::Manager::new(client.get_connection_info().clone())
                    .context("a redis pool manager")?,
            ),
            Self::Sentinel(_) => Manager::Sentinel(self.clone()),
        };
        managed::Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(Duration::from_secs(5)))
            .create_timeout(Some(Duration::from_secs(2)))
            .runtime(deadpool_redis::Runtime::Tokio1)
            .build()
            .context("creating the redis pool")
    }
}

/// Pooled connections to the main Redis.
pub type RedisPool = managed::Pool<Manager, PooledRedis>;

/// Makes and checks the pool's connections.
pub enum Manager {
    /// deadpool-redis's own manager, unchanged: `UNWATCH` and `PING` on
    /// every checkout.
    Fixed(deadpool_redis::Manager),
    /// New connections through the sentinels; `UNWATCH` and `ROLE` on
    /// every checkout, so a demoted master's connections are dropped.
    Sentinel(MainRedis),
}

impl managed::Manager for Manager {
    type Type = MultiplexedConnection;
    type Error = RedisError;

    async fn create(&self) -> Result<MultiplexedConnection, RedisError> {
        match self {
            Self::Fixed(manager) => managed::Manager::create(manager).await,
            Self::Sentinel(main) => main.get_multiplexed_async_connection().await,
        }
    }

    async fn recycle(
        &self,
        conn: &mut MultiplexedConnection,
        metrics: &Metrics,
    ) -> RecycleResult<RedisError> {
        match self {
            Self::Fixed(manager) => managed::Manager::recycle(manager, conn, metrics).await,
            Self::Sentinel(_) => {
                let (role,): (redis::Role,) = redis::pipe()
                    .cmd("UNWATCH")
                    .ignore()
                    .cmd("ROLE")
                    .query_async(conn)
                    .await?;
                match role {
                    redis::Role::Primary { .. } => Ok(()),
                    _ => Err(RecycleError::message("the server is no longer the master")),
                }
            }
        }
    }
}

/// A connection checked out of [`RedisPool`]: used as the multiplexed
/// connection it wraps, and returned to the pool when dropped.
pub struct PooledRedis(managed::Object<Manager>);

impl From<managed::Object<Manager>> for PooledRedis {
    fn from(object: managed::Object<Manager>) -> Self {
        Self(object)
    }
}

impl std::ops::Deref for PooledRedis {
    type Target = MultiplexedConnection;

    fn deref(&self) -> &MultiplexedConnection {
        &self.0
    }
}

impl std::ops::DerefMut for PooledRedis {
    fn deref_mut(&mut self) -> &mut MultiplexedConnection {
        &mut self.0
    }
}

impl ConnectionLike for PooledRedis {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        self.0.req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        self.0.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.0.get_db()
    }
}
