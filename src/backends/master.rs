//! The main Redis (stock, locks, the order streams): at one fixed address,
//! wherever Redis Sentinel says the master is now, or a Redis Cluster.
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
//!
//! A cluster follows its own failovers: redis-rs's cluster connection
//! refreshes its slot map on `MOVED` or a lost node. What it must not do
//! on the buy path is *retry*: it resends a command whose connection
//! dropped, and a selling script that ran before the drop would run twice
//! (see [`ClusterClients`]).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use redis::aio::{ConnectionLike, PubSub};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::io::tcp::TcpSettings;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{AsyncConnectionConfig, ConnectionInfo, IntoConnectionInfo, RedisError, RedisResult};

use super::conn::RedisConn;

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
    /// A Redis Cluster, reached through any of its nodes
    /// (`SECKILL_REDIS_CLUSTER`).
    Cluster(Arc<ClusterClients>),
}

/// The clients of a cluster: one per retry policy.
pub struct ClusterClients {
    /// The buy path's: never retries. redis-rs resends a command whose
    /// connection dropped, or that met `MOVED`, `TRYAGAIN` or
    /// `CLUSTERDOWN`; a selling script that ran before its connection
    /// dropped would then sell twice. Without retries the buy answers
    /// what it knows instead: `unavailable` when nothing ran (a redirect,
    /// a cluster down), `outcome_unknown` when the script was sent and the
    /// answer lost.
    once: ClusterClient,
    /// Everything else (resets, ledger reads, the order writers): follows
    /// redirects and waits out a failover, which their commands survive
    /// being sent twice.
    patient: ClusterClient,
    /// Every node's URL, for Pub/Sub: any node serves it (a cluster passes
    /// every `PUBLISH` to all its nodes).
    nodes: Vec<String>,
}

/// Every connection to Redis sends at once (`TCP_NODELAY`; redis-rs
/// leaves Nagle's algorithm on). The buy path's commands are small and
/// many share one multiplexed connection, so with Nagle each write that
/// follows an unacknowledged one waits for an ACK, which the peer delays
/// until it has data to carry it: a wait per command on any link slower
/// than loopback. Measured on a Redis link 2 ms slower each way, a
/// `redis-lock` holder's every turn (reply in, next command out) took
/// about 5 ms on top of the link's.
pub fn tcp() -> TcpSettings {
    TcpSettings::default().set_nodelay(true)
}

/// `url`'s connection info, with [`tcp`]'s settings.
pub fn connection_info(url: &str) -> RedisResult<ConnectionInfo> {
    Ok(url.into_connection_info()?.set_tcp_settings(tcp()))
}

impl MainRedis {
    /// The Redis at `url`.
    pub fn fixed(url: &str) -> RedisResult<Self> {
        Ok(Self::Fixed(redis::Client::open(connection_info(url)?)?))
    }

    /// The master the sentinels at `sentinels` (`host:port` or
    /// `redis://…` URLs) know as `master_name`.
    pub fn sentinel(sentinels: &[String], master_name: &str) -> RedisResult<Self> {
        let urls: Vec<String> = sentinels.iter().map(|s| url(s)).collect();
        let client = SentinelClient::build(
            urls,
            master_name.to_owned(),
            Some(SentinelNodeConnectionInfo::default().set_tcp_settings(tcp())),
            SentinelServerType::Master,
        )?;
        Ok(Self::Sentinel(Arc::new(tokio::sync::Mutex::new(client))))
    }

    /// The Redis Cluster that `nodes` (`host:port` or URLs, any of its
    /// nodes) belong to.
    pub fn cluster(nodes: &[String]) -> RedisResult<Self> {
        let nodes: Vec<String> = nodes.iter().map(|n| url(n)).collect();
        let builder = || {
            ClusterClientBuilder::new(nodes.clone())
                .tcp_settings(tcp())
                .connection_timeout(CONNECT_TIMEOUT)
                .response_timeout(Duration::from_secs(5))
        };
        Ok(Self::Cluster(Arc::new(ClusterClients {
            once: builder().retries(0).build()?,
            patient: builder().build()?,
            nodes,
        })))
    }

    /// A client for the master now (a cluster has no one master).
    async fn client(&self) -> RedisResult<redis::Client> {
        match self {
            Self::Fixed(client) => Ok(client.clone()),
            Self::Sentinel(sentinels) => sentinels.lock().await.async_get_client().await,
            Self::Cluster(_) => Err(RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a cluster has no single master",
            ))),
        }
    }

    /// Whether this is a cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster(_))
    }

    /// A new connection to the master now (to the cluster: one that
    /// follows redirects and retries).
    pub async fn get_multiplexed_async_connection(&self) -> RedisResult<RedisConn> {
        self.get_multiplexed_async_connection_with_config(&AsyncConnectionConfig::new())
            .await
    }

    /// The same, with `config`'s timeouts (a cluster keeps its own).
    pub async fn get_multiplexed_async_connection_with_config(
        &self,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<RedisConn> {
        match self {
            Self::Cluster(clients) => Ok(RedisConn::Cluster(
                clients.patient.get_async_connection().await?,
            )),
            _ => Ok(RedisConn::Single(
                self.client()
                    .await?
                    .get_multiplexed_async_connection_with_config(config)
                    .await?,
            )),
        }
    }

    /// The buy path's connection: to the master now, speaking `protocol`,
    /// with `config`'s timeouts and push sender (RESP3 only); to a
    /// cluster, one that never retries.
    pub async fn connect(
        &self,
        protocol: redis::ProtocolVersion,
        config: &AsyncConnectionConfig,
    ) -> RedisResult<RedisConn> {
        if let Self::Cluster(clients) = self {
            return Ok(RedisConn::Cluster(
                clients.once.get_async_connection().await?,
            ));
        }
        let info = self.client().await?.get_connection_info().clone();
        let settings = info.redis_settings().clone().set_protocol(protocol);
        Ok(RedisConn::Single(
            redis::Client::open(info.set_redis_settings(settings))?
                .get_multiplexed_async_connection_with_config(config)
                .await?,
        ))
    }

    /// A new Pub/Sub connection to the master now; on a cluster, to the
    /// first node that answers.
    pub async fn get_async_pubsub(&self) -> RedisResult<PubSub> {
        let Self::Cluster(clients) = self else {
            return self.client().await?.get_async_pubsub().await;
        };
        let mut last = None;
        for node in &clients.nodes {
            let connected = tokio::time::timeout(
                CONNECT_TIMEOUT,
                redis::Client::open(connection_info(node)?)?.get_async_pubsub(),
            )
            .await;
            match connected {
                Ok(Ok(pubsub)) => return Ok(pubsub),
                Ok(Err(error)) => last = Some(error),
                Err(_) => {}
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((redis::ErrorKind::Io, "no cluster node answered"))
        }))
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
            Self::Sentinel(_) | Self::Cluster(_) => Manager::Following(self.clone()),
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

/// Longest wait for a new connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// `host:port` as a `redis://` URL; a URL as it is.
fn url(node: &str) -> String {
    if node.contains("://") {
        node.to_owned()
    } else {
        format!("redis://{node}")
    }
}

/// Pooled connections to the main Redis.
pub type RedisPool = managed::Pool<Manager, PooledRedis>;

/// Makes and checks the pool's connections.
pub enum Manager {
    /// deadpool-redis's own manager, unchanged: `UNWATCH` and `PING` on
    /// every checkout.
    Fixed(deadpool_redis::Manager),
    /// New connections through the sentinels, or to the cluster. With
    /// sentinels: `UNWATCH` and `ROLE` on every checkout, so a demoted
    /// master's connections are dropped. A cluster connection follows its
    /// masters itself: `PING` (to a random master) on every checkout.
    Following(MainRedis),
}

impl managed::Manager for Manager {
    type Type = RedisConn;
    type Error = RedisError;

    async fn create(&self) -> Result<RedisConn, RedisError> {
        match self {
            Self::Fixed(manager) => Ok(RedisConn::Single(managed::Manager::create(manager).await?)),
            Self::Following(main) => main.get_multiplexed_async_connection().await,
        }
    }

    async fn recycle(&self, conn: &mut RedisConn, metrics: &Metrics) -> RecycleResult<RedisError> {
        match (self, conn) {
            (Self::Fixed(manager), RedisConn::Single(conn)) => {
                managed::Manager::recycle(manager, conn, metrics).await
            }
            (_, conn @ RedisConn::Cluster(_)) => {
                redis::cmd("PING").query_async::<()>(conn).await?;
                Ok(())
            }
            (_, conn) => {
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
    type Target = RedisConn;

    fn deref(&self) -> &RedisConn {
        &self.0
    }
}

impl std::ops::DerefMut for PooledRedis {
    fn deref_mut(&mut self) -> &mut RedisConn {
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
