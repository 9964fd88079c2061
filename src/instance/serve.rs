//! `seckill serve`: one instance — pools, migrations, the order writer and
//! the HTTP server, with a graceful shutdown that finishes in-flight buys
//! and then drains the writer.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::backends::Backends;
use crate::backends::flags::Databases;
use crate::backends::lane::Lane;
use crate::backends::master::MainRedis;
use crate::backends::redlock::Master;
use crate::backends::zookeeper::ZkSession;
use crate::instance::auth::{AuthArgs, Identify};
use crate::instance::edge::EdgeArgs;
use crate::instance::http::{AppState, Credentials, router};
use crate::model::telemetry;
use crate::orders::life;
use crate::orders::writer;
use crate::sale::live;
use crate::sale::memory;
use crate::sale::memory::Memory;
use crate::sale::reservation::Reservations;

/// Configuration of one instance; every flag has an environment fallback.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "SECKILL_LISTEN", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,
    /// Name shown as `served_by` (default: the host name, so each container
    /// of a scaled compose service is told apart).
    #[arg(long, env = "SECKILL_INSTANCE")]
    pub instance: Option<String>,
    /// Redis holding stock, locks and the order stream, at a fixed
    /// address. One of this, `--redis-sentinels` or `--redis-cluster`.
    #[arg(
        long,
        env = "SECKILL_REDIS_URL",
        required_unless_present_any = ["redis_sentinels", "redis_cluster"],
        conflicts_with_all = ["redis_sentinels", "redis_cluster"]
    )]
    pub redis_url: Option<String>,
    /// Redis Sentinels (`host:port`, comma-separated) that name the master
    /// of that Redis instead: the instance connects to whichever server
    /// they name, and follows a failover (see `backends::master`).
    #[arg(long, env = "SECKILL_REDIS_SENTINELS", value_delimiter = ',')]
    pub redis_sentinels: Vec<String>,
    /// A Redis Cluster instead (`host:port` of any of its nodes,
    /// comma-separated): every product's keys live on the master serving
    /// their hash slot (see `product::keys`).
    #[arg(
        long,
        env = "SECKILL_REDIS_CLUSTER",
        value_delimiter = ',',
        conflicts_with = "redis_sentinels"
    )]
    pub redis_cluster: Vec<String>,
    /// The name the sentinels know that master by.
    #[arg(long, env = "SECKILL_REDIS_MASTER_NAME", default_value = "seckill")]
    pub redis_master_name: String,
    /// Independent Redis masters for `redlock`, comma-separated (default:
    /// just the main Redis at `--redis-url`, a quorum of one; required
    /// with sentinels or a cluster, since a RedLock master is a fixed
    /// address that never fails over nor shares a keyspace).
    #[arg(long, env = "SECKILL_REDLOCK_URLS", value_delimiter = ',')]
    pub redlock_urls: Vec<String>,
    /// ZooKeeper `host:port` for the `zookeeper` strategy (optional).
    #[arg(long, env = "SECKILL_ZOOKEEPER")]
    pub zookeeper: Option<String>,
    /// ZooKeeper session timeout: how long a dead instance's lock nodes
    /// outlive it.
    #[arg(long, env = "SECKILL_ZOOKEEPER_SESSION_MS", default_value_t = 2000)]
    pub zookeeper_session_ms: u64,
    /// etcd endpoints (`host:port`, comma-separated) for the `etcd`
    /// strategy (optional).
    #[arg(long, env = "SECKILL_ETCD")]
    pub etcd: Option<String>,
    /// PostgreSQL and MySQL.
    #[command(flatten)]
    pub databases: Databases,
    /// MySQL connections per instance.
    #[arg(long, env = "SECKILL_MYSQL_POOL", default_value_t = 64)]
    pub mysql_pool: u32,
    /// Bearer token for `PUT /admin/…`. There is no default: an instance
    /// without one must not start.
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// The key reservations are signed with (pre-booking); the same on
    /// every instance. Default: derived from the admin token.
    #[arg(long, env = "SECKILL_RESERVATION_KEY", hide_env_values = true)]
    pub reservation_key: Option<String>,
    /// Redis connections per instance. A buyer holds one per command, and
    /// spinning lock waiters must not starve the lock holder of connections,
    /// so this is sized for the in-flight requests, not the cores.
    #[arg(long, env = "SECKILL_REDIS_POOL", default_value_t = 256)]
    pub redis_pool: usize,
    /// Rate limits and overload protection.
    #[command(flatten)]
    pub edge: EdgeArgs,
    /// How buyers are identified.
    #[command(flatten)]
    pub auth: AuthArgs,
    /// PostgreSQL connections per instance.
    #[arg(long, env = "SECKILL_PG_POOL", default_value_t = 64)]
    pub pg_pool: u32,
}

/// Runs an instance until SIGTERM or Ctrl-C.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.admin_token.len() >= 8,
        "the admin token must be at least 8 characters"
    );
    args.databases.postgres()?;
    let instance = args.instance.clone().unwrap_or_else(default_instance_name);
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let backends = prepare(&args).await?;
    // Not one answer about the sale window before the instance reads
    // the shared clock.
    let rtt = retrying_sync(&backends).await?;
    tracing::info!(
        rtt_us = rtt.as_micros() as u64,
        "the shared clock is synced"
    );

    // Every task of the instance stops on this one signal, sent once the
    // HTTP server has finished its in-flight requests.
    let (stop, stopping) = watch::channel(false);
    let consumer = format!("{instance}-{}", uuid::Uuid::new_v4().simple());
    let writer = tokio::spawn(writer::run(
        backends.redis_client.clone(),
        backends.pg.clone(),
        consumer,
        stopping.clone(),
    ));
    let memory = Arc::new(Memory::default());
    let listener_task = tokio::spawn(memory::listen(
        backends.redis_client.clone(),
        memory.clone(),
        stopping.clone(),
    ));
    let live = tokio::spawn(live::publish(
        backends.clone(),
        instance.clone(),
        memory.live.clone(),
        stopping.clone(),
    ));
    let clock = tokio::spawn({
        let (clock, redis) = (backends.clock.clone(), backends.redis.clone());
        let stopping = stopping.clone();
        async move { clock.keep_synced(redis, stopping).await }
    });
    let metrics = telemetry::install();
    let upkeep = tokio::spawn(telemetry::upkeep(metrics.clone(), stopping.clone()));
    let reservations = Reservations::new(args.reservation_key.as_deref(), &args.admin_token);
    let credentials = Credentials {
        admin_token: args.admin_token,
        buyers: Identify::new(&args.auth)?,
    };
    let state = AppState::new(
        backends,
        instance.clone(),
        credentials,
        reservations,
        args.edge,
        memory,
        metrics,
    );
    let reaper = tokio::spawn(life::reaper::run(state.shop().clone(), stopping));
    tracing::info!(%instance, listen = %listener.local_addr()?, "serving");
    serve(listener, state, shutdown_signal()).await?;
    tracing::info!("http stopped; draining the order writer");
    let _ = stop.send(true);
    writer.await.context("order writer panicked")?;
    let _ = tokio::join!(listener_task, upkeep, live, reaper, clock);
    tracing::info!("stopped");
    Ok(())
}

/// Serves `state` on an already bound listener until `shutdown` resolves,
/// then waits for in-flight requests (the caller picks the port and the
/// signal, so tests can bind port 0 and stop at will).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .context("http server")
}

/// Pools for every backend, with the database migrated: what an instance
/// (or an in-process test of the router) needs before it can serve.
pub async fn prepare(args: &ServeArgs) -> anyhow::Result<Backends> {
    let backends = connect(args).await?;
    // sqlx takes a PostgreSQL advisory lock around the migration, so
    // instances starting together apply it once.
    sqlx::migrate!()
        .run(&backends.pg)
        .await
        .context("applying migrations")?;
    if let Some(mysql) = &backends.mysql {
        migrate_mysql(mysql).await?;
    }
    Ok(backends)
}

/// MySQL's own schema, applied once however many instances start
/// together. sqlx's own guard, `GET_LOCK(name, -1)`, does not wait on
/// MariaDB (a negative timeout is MySQL's "forever" only; MariaDB 10.11
/// answers NULL at once, and sqlx ignores the answer), and two
/// instances then apply the same migration: so the migrator runs under a
/// named lock of our own that does wait, on the connection that holds it.
async fn migrate_mysql(mysql: &sqlx::MySqlPool) -> anyhow::Result<()> {
    let mut conn = mysql.acquire().await.context("a MySQL connection")?;
    let locked: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK('seckill_migrations', 60)")
        .fetch_one(&mut *conn)
        .await
        .context("locking MySQL's migrations")?;
    anyhow::ensure!(
        locked == Some(1),
        "another instance held MySQL's migration lock for 60 s"
    );
    let applied = sqlx::migrate!("./migrations-mysql")
        .run(&mut *conn)
        .await
        .context("applying MySQL migrations");
    let _ = sqlx::query("SELECT RELEASE_LOCK('seckill_migrations')")
        .execute(&mut *conn)
        .await;
    applied
}

/// Pools for every backend, retrying while they come up (compose starts
/// everything at once).
async fn connect(args: &ServeArgs) -> anyhow::Result<Backends> {
    let main = match &args.redis_url {
        Some(url) => MainRedis::fixed(url),
        None if !args.redis_cluster.is_empty() => MainRedis::cluster(&args.redis_cluster),
        None => MainRedis::sentinel(&args.redis_sentinels, &args.redis_master_name),
    }
    .context("the main redis")?;
    let redis = main.pool(args.redis_pool)?;
    let redlock_urls = match (&args.redis_url, args.redlock_urls.is_empty()) {
        (_, false) => &args.redlock_urls[..],
        (Some(url), true) => std::slice::from_ref(url),
        (None, true) => {
            anyhow::bail!(
                "--redlock-urls is required when the main redis is found through sentinels or is a cluster"
            )
        }
    };
    let redlock = redlock_urls
        .iter()
        .map(|url| Master::new(url))
        .collect::<Result<Vec<_>, _>>()?;
    let zookeeper = match &args.zookeeper {
        Some(hosts) => {
            Some(ZkSession::connect(hosts, Duration::from_millis(args.zookeeper_session_ms)).await?)
        }
        None => None,
    };
    let etcd = match &args.etcd {
        Some(endpoints) if !endpoints.is_empty() => {
            Some(crate::backends::etcd::connect(endpoints).await?)
        }
        _ => None,
    };
    let database_url = args.databases.postgres()?;
    let pg = retrying("postgres", || {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(args.pg_pool)
            .acquire_timeout(Duration::from_secs(5))
            // No ping round trip on every checkout: a broken connection
            // fails its query and the pool replaces it.
            .test_before_acquire(false)
            .connect(database_url)
    })
    .await?;
    let mysql = match &args.databases.mysql_url {
        Some(url) if !url.is_empty() => Some(
            retrying("mysql", || {
                sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(args.mysql_pool)
                    .acquire_timeout(Duration::from_secs(5))
                    .test_before_acquire(false)
                    .connect(url)
            })
            .await?,
        ),
        _ => None,
    };
    Ok(Backends {
        redis,
        lane: Arc::new(Lane::new(main.clone())),
        redis_client: main,
        pg,
        mysql,
        redlock: Arc::new(redlock),
        zookeeper,
        etcd,
        clock: Arc::default(),
    })
}

/// The shared clock's first sync, retried once a second for 30 s while
/// Redis comes up.
async fn retrying_sync(backends: &Backends) -> anyhow::Result<Duration> {
    let mut tries = 0;
    loop {
        match backends.clock.sync(&backends.redis).await {
            Ok(rtt) => return Ok(rtt),
            Err(error) if tries >= 30 => {
                return Err(anyhow::anyhow!(error).context("syncing the shared clock with Redis"));
            }
            Err(error) => tracing::warn!(%error, "the shared clock waits for Redis"),
        }
        tries += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A pool from `connect`, retried once a second for 30 s while the
/// server comes up.
async fn retrying<P, F, Fut>(server: &str, mut connect: F) -> anyhow::Result<P>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<P, sqlx::Error>>,
{
    let mut attempt = 0;
    loop {
        match connect().await {
            Ok(pool) => return Ok(pool),
            Err(error) if attempt < 30 => {
                attempt += 1;
                tracing::warn!(%error, attempt, server, "not reachable yet");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(error) => return Err(error).with_context(|| format!("connecting to {server}")),
        }
    }
}

fn default_instance_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("seckill-{}", std::process::id()))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
