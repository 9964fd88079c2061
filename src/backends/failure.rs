//! The backends' one error type, [`BackendError`], and its transport
//! rules: what a failure says about the connection (broken, refused, a
//! refusal that ran nothing) and about the step that sells
//! ([`BackendError::at_commit`]: sent and not answered is an unknown
//! outcome). Beside the backends, whose failures it classifies; the HTTP
//! layer above maps it to a status.

/// How a Redis error's text begins (see [`BackendError::Redis`]).
const REDIS_PREFIX: &str = "redis: ";

/// A failure of a backend (Redis, PostgreSQL) while serving a request.
///
/// Strategies return this for infrastructure trouble only; "sold out" and
/// "busy" are ordinary outcomes of a sale, not errors.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// Redis refused, timed out or dropped the connection.
    #[error("redis: {0}")] // REDIS_PREFIX
    Redis(#[from] redis::RedisError),
    /// The Redis pool could not hand out a connection.
    #[error("redis pool: {0}")]
    RedisPool(#[from] deadpool_redis::PoolError),
    /// PostgreSQL or MySQL failed a query or the pool timed out (sqlx's
    /// one error type for both; the text names the server's error).
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    /// ZooKeeper failed or the session ended.
    #[error("zookeeper: {0}")]
    ZooKeeper(String),
    /// etcd failed or did not answer in time.
    #[error("etcd: {0}")]
    Etcd(String),
    /// The strategy needs a backend this instance was not configured with.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The product's lock was not acquired in time for an operation that
    /// runs under it (an addition, a give-back, a repair): nothing ran,
    /// and the caller may retry, as a buyer told `busy` may.
    #[error("contended: {0}")]
    Contended(String),
    /// The task running a sale died (a panic): reported, never retried.
    #[error("sale task: {0}")]
    Task(String),
    /// Stored data did not have the shape this code wrote (a bug or a
    /// hand-edited key), reported instead of guessed around.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// The step that sells (a COMMIT, the script that decrements and
    /// records) was sent and no answer came back: the sale may or may not
    /// have happened. Made only by [`BackendError::at_commit`].
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The step that sold to a whole group failed for a reason that is
    /// not the connection's: this buyer's copy (see
    /// [`BackendError::for_another`]).
    #[error("the group's step failed: {0}")]
    Group(String),
}

impl BackendError {
    /// Reclassifies an error of the step that sells. A connection that was
    /// never made, or a pool that handed out nothing, sent nothing: the
    /// error stands. Anything else on the way (a reset, a timeout, a
    /// server that died mid-COMMIT) may have come after the server applied
    /// the write, so the outcome is unknown — never "nothing was sold".
    #[must_use]
    pub fn at_commit(self) -> Self {
        if self.surely_unsent() || !self.is_transport() {
            self
        } else {
            Self::OutcomeUnknown(self.to_string())
        }
    }

    /// The backend could not be reached or dropped the connection, as
    /// opposed to answering with an error of its own.
    pub fn is_transport(&self) -> bool {
        match self {
            Self::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || refused_unrun(e)
            }
            Self::RedisPool(_) | Self::ZooKeeper(_) | Self::Etcd(_) | Self::Unavailable(_) => true,
            Self::Sql(e) => sql_transport(e),
            Self::Task(_)
            | Self::Corrupt(_)
            | Self::OutcomeUnknown(_)
            | Self::Group(_)
            | Self::Contended(_) => false,
        }
    }

    /// The same failure for one more buyer of a group whose step failed.
    /// Errors are not `Clone`; each buyer gets a copy that answers as the
    /// original would (`outcome_unknown`, `unavailable` or `backend`),
    /// with its text.
    #[must_use]
    pub fn for_another(&self) -> Self {
        match self {
            Self::OutcomeUnknown(cause) => Self::OutcomeUnknown(cause.clone()),
            error if error.is_transport() => Self::Unavailable(error.to_string()),
            error => Self::Group(error.to_string()),
        }
    }

    /// Redis's connection is broken (or answers for a server that is no
    /// longer the master, `READONLY`), also when this was the selling step
    /// and became an unknown outcome: whoever shares that connection must
    /// stop using it (the buy path's shared connection is retired on it).
    pub fn breaks_redis_connection(&self) -> bool {
        match self {
            Self::Redis(e) => {
                e.is_io_error()
                    || e.is_timeout()
                    || e.is_connection_dropped()
                    || e.code() == Some("READONLY")
            }
            // Made from the Redis error's own text by `at_commit`.
            Self::OutcomeUnknown(cause) => cause.starts_with(REDIS_PREFIX),
            _ => false,
        }
    }

    /// Nothing can have reached the server: the connection was refused or
    /// never handed out.
    fn surely_unsent(&self) -> bool {
        match self {
            Self::Redis(e) => e.is_connection_refusal() || refused_unrun(e),
            Self::RedisPool(_) | Self::Unavailable(_) => true,
            Self::Sql(e) => {
                matches!(e, sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed)
                    || matches!(e, sqlx::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused)
            }
            _ => false,
        }
    }
}

/// A refusal to run a command here and now, made before anything ran:
/// the slot moved (`MOVED`, `ASK`: the buy path's cluster connection does
/// not follow redirects, see `backends::master`), the cluster or the
/// slot's master is down (`CLUSTERDOWN`, `MASTERDOWN`, `TRYAGAIN`), the
/// server was demoted to a replica (`READONLY`, after a failover), or no
/// connection to the slot's node exists; or the server itself will not
/// write now — out of memory under `maxmemory` (`OOM`), its last
/// background save or AOF write failed (`MISCONF`), it is loading its
/// data after a restart (`LOADING`), a script is running past its time
/// (`BUSY`). Redis decides each before it runs the command, and inside a
/// script only at the script's first write (`scriptVerifyOOM` and
/// `scriptVerifyWriteCommandAllow` check `SCRIPT_WRITE_DIRTY`), so nothing
/// of the command ran, and asking again later may succeed: `unavailable`,
/// like a refused connection.
fn refused_unrun(error: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    matches!(
        error.kind(),
        ErrorKind::ClusterConnectionNotFound
            | ErrorKind::Server(
                ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::BusyLoading
            )
    ) || matches!(error.code(), Some("OOM" | "MISCONF" | "BUSY"))
}

/// A database error that is about the connection rather than the
/// statement: I/O, the pool, or the server going away (SQLSTATE class 08,
/// connection exception — MySQL's shutdown is 08S01 — and PostgreSQL's
/// 57P0x, shutting down), which answers with an error but is still a
/// server that is not there.
fn sql_transport(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P0")),
        _ => false,
    }
}

/// `.at_commit()` on the result of the step that sells.
pub trait AtCommit<T> {
    /// See [`BackendError::at_commit`].
    fn at_commit(self) -> Result<T, BackendError>;
}

impl<T, E: Into<BackendError>> AtCommit<T> for Result<T, E> {
    fn at_commit(self) -> Result<T, BackendError> {
        self.map_err(|e| e.into().at_commit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_redis_connection_is_known_also_after_an_unknown_outcome() {
        let broken = || {
            BackendError::Redis(redis::RedisError::from(std::io::Error::from(
                std::io::ErrorKind::BrokenPipe,
            )))
        };
        assert!(broken().breaks_redis_connection());
        let unknown = broken().at_commit();
        assert!(matches!(unknown, BackendError::OutcomeUnknown(_)));
        assert!(unknown.breaks_redis_connection());
        let postgres = BackendError::Sql(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::BrokenPipe,
        )));
        assert!(!postgres.at_commit().breaks_redis_connection());
        let refused = BackendError::Redis(redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "READONLY",
        )));
        // A demoted master ran nothing: unavailable, not unknown.
        assert!(refused.breaks_redis_connection() && refused.is_transport());
        assert!(matches!(refused.at_commit(), BackendError::Redis(_)));
    }

    #[test]
    fn a_cluster_that_redirects_or_is_down_ran_nothing() {
        for kind in [
            redis::ServerErrorKind::Moved,
            redis::ServerErrorKind::Ask,
            redis::ServerErrorKind::TryAgain,
            redis::ServerErrorKind::ClusterDown,
            redis::ServerErrorKind::MasterDown,
        ] {
            let error = BackendError::Redis(redis::RedisError::from((
                redis::ErrorKind::Server(kind),
                "cluster",
            )));
            assert!(error.is_transport(), "{kind:?}");
            assert!(!error.breaks_redis_connection(), "{kind:?}");
            // Sent but surely not run: never an unknown outcome.
            assert!(
                matches!(error.at_commit(), BackendError::Redis(_)),
                "{kind:?}"
            );
        }
        let script_error = BackendError::Redis(redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError),
            "ERR",
        )));
        assert!(!script_error.is_transport());
    }
}
