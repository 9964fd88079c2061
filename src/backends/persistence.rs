//! What the backends this instance talks to will keep after a crash, read
//! from the servers themselves (not from how they were meant to be
//! started), so `GET /config` and the comparison say what really ran.

use serde::Serialize;
use utoipa::ToSchema;

use super::Backends;

/// The persistence settings that decide what a crash loses.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct Persistence {
    /// The lab's mode these settings are (`durable`: every server
    /// fsyncs before it acknowledges; `relaxed`: about once a second
    /// after; `fast`: never), `mixed` when the servers differ, `unknown`
    /// when one did not answer.
    pub mode: &'static str,
    /// PostgreSQL's `fsync` and `synchronous_commit`.
    pub postgres: Option<PgPersistence>,
    /// Redis's `appendonly`, `appendfsync` and `save`.
    pub redis: Option<RedisPersistence>,
    /// MySQL's InnoDB redo-log flush, when the instance has a MySQL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mysql: Option<MysqlPersistence>,
}

/// MySQL's (InnoDB's) setting.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, ToSchema)]
pub struct MysqlPersistence {
    /// `innodb_flush_log_at_trx_commit`: 1 flushes and fsyncs the redo
    /// log at every commit; 0 and 2 once a second.
    pub innodb_flush_log_at_trx_commit: i64,
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
    let mysql = match &backends.mysql {
        Some(pool) => Some(mysql(pool).await),
        None => None,
    };
    let mode = match (&postgres, &redis, &mysql) {
        (Some(pg), Some(redis), None | Some(Some(_))) => {
            let mut modes = vec![pg.mode(), redis.mode()];
            if let Some(Some(mysql)) = &mysql {
                modes.push(mysql.mode());
            }
            match modes.windows(2).all(|pair| pair[0] == pair[1]) {
                true => modes[0],
                false => "mixed",
            }
        }
        _ => "unknown",
    };
    Persistence {
        mode,
        postgres,
        redis,
        mysql: mysql.flatten(),
    }
}

impl PgPersistence {
    /// Which of the lab's modes (`durable`, `relaxed`, `fast`) these
    /// settings are, or `mixed`.
    fn mode(&self) -> &'static str {
        match (self.fsync.as_str(), self.synchronous_commit.as_str()) {
            ("on", "off") => "relaxed",
            ("on", _) => "durable",
            ("off", "off") => "fast",
            _ => "mixed",
        }
    }
}

impl RedisPersistence {
    /// As [`PgPersistence::mode`].
    fn mode(&self) -> &'static str {
        match (self.appendonly.as_str(), self.appendfsync.as_str()) {
            ("yes", "always") => "durable",
            ("yes", "everysec") => "relaxed",
            ("no", _) if self.save.is_empty() => "fast",
            _ => "mixed",
        }
    }
}

impl MysqlPersistence {
    /// As [`PgPersistence::mode`].
    fn mode(&self) -> &'static str {
        match self.innodb_flush_log_at_trx_commit {
            1 => "durable",
            2 => "relaxed",
            _ => "fast",
        }
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

async fn mysql(pool: &sqlx::MySqlPool) -> Option<MysqlPersistence> {
    let flush: i64 = sqlx::query_scalar("SELECT CAST(@@innodb_flush_log_at_trx_commit AS SIGNED)")
        .fetch_one(pool)
        .await
        .ok()?;
    Some(MysqlPersistence {
        innodb_flush_log_at_trx_commit: flush,
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
