//! What the backends this instance talks to will keep after a crash, read
//! from the servers themselves (not from how they were meant to be
//! started), so `GET /config` and the comparison say what really ran.

use serde::Serialize;
use utoipa::ToSchema;

use super::Backends;

/// The persistence settings that decide what a crash loses.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct Persistence {
    /// `durable` when PostgreSQL fsyncs every commit and Redis keeps an
    /// append-only file; `fast` when neither does; `mixed` otherwise;
    /// `unknown` when a server did not answer.
    pub mode: &'static str,
    /// PostgreSQL's `fsync` and `synchronous_commit`.
    pub postgres: Option<PgPersistence>,
    /// Redis's `appendonly`, `appendfsync` and `save`.
    pub redis: Option<RedisPersistence>,
}

/// PostgreSQL's settings.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct PgPersistence {
    /// `on` or `off`.
    pub fsync: String,
    /// `on`, `off`, `local`, `remote_write`…
    pub synchronous_commit: String,
}

/// Redis's settings.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct RedisPersistence {
    /// `yes` or `no`.
    pub appendonly: String,
    /// `always`, `everysec` or `no`.
    pub appendfsync: String,
    /// RDB snapshot schedule (`""`: none).
    pub save: String,
}

/// Asks both servers.
pub async fn read(backends: &Backends) -> Persistence {
    let postgres = pg(backends).await;
    let redis = redis(backends).await;
    let mode = match (&postgres, &redis) {
        (Some(pg), Some(redis)) => {
            let pg_durable = pg.fsync == "on" && pg.synchronous_commit != "off";
            let redis_durable = redis.appendonly == "yes";
            match (pg_durable, redis_durable) {
                (true, true) => "durable",
                (false, false) => "fast",
                _ => "mixed",
            }
        }
        _ => "unknown",
    };
    Persistence {
        mode,
        postgres,
        redis,
    }
}

async fn pg(backends: &Backends) -> Option<PgPersistence> {
    let (fsync, synchronous_commit): (String, String) =
        sqlx::query_as("SELECT current_setting('fsync'), current_setting('synchronous_commit')")
            .fetch_one(&backends.pg)
            .await
            .ok()?;
    Some(PgPersistence {
        fsync,
        synchronous_commit,
    })
}

async fn redis(backends: &Backends) -> Option<RedisPersistence> {
    let mut conn = backends.redis.get().await.ok()?;
    let mut get = async |name: &str| -> Option<String> {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut *conn)
            .await
            .ok()?;
        pair.into_iter().nth(1)
    };
    Some(RedisPersistence {
        appendonly: get("appendonly").await?,
        appendfsync: get("appendfsync").await?,
        save: get("save").await?,
    })
}
