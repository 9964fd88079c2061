//! Errors, one enum per layer, and the one place where they become HTTP
//! statuses and the contract's JSON body `{"error":{"code":…,"message":…}}`.

use std::time::Duration;

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{Object, ObjectBuilder, Type};

/// The header naming the layer that answered 429.
pub const LIMITED_BY: &str = "x-limited-by";

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
            Self::Task(_) | Self::Corrupt(_) | Self::OutcomeUnknown(_) | Self::Group(_) => false,
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

/// `duration` in whole seconds, rounded up, at least 1: what
/// `Retry-After` can say.
fn whole_seconds(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil().max(1.0) as u64
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

/// Input the domain refuses (a malformed id, an out-of-range setting, an
/// unknown strategy): a domain error with the reason, which the HTTP layer
/// answers as 400 `bad_request` (see [`ApiError`]'s `From`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

/// Everything an HTTP handler can answer with besides success.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: a malformed id, buyer, header or body.
    #[error("{0}")]
    BadRequest(String),
    /// 401: the admin endpoint was called without a bearer token.
    #[error("missing admin token")]
    Unauthorized,
    /// 403: the bearer token is not the admin token.
    #[error("wrong admin token")]
    Forbidden,
    /// 403: the product's sale window has not opened yet.
    #[error("the sale opens in {} s", whole_seconds(*.starts_in))]
    NotStarted {
        /// How long until it opens: `seconds_left` in the body, and
        /// `Retry-After`.
        starts_in: Duration,
        /// When it opens (ms since the Unix epoch), for a client that
        /// counts down to the moment rather than to the next second.
        opens_at_ms: u64,
    },
    /// 410: the product's sale window has closed.
    #[error("the sale has ended")]
    Ended,
    /// 403: the product sells only to buyers with a reservation, and this
    /// request carries none for this buyer (missing, forged, another
    /// buyer's, or made before the last reset).
    #[error("this product sells only to buyers holding a reservation (X-Reservation)")]
    NotReserved,
    /// 409: no reservation can be made: the product takes none, or its
    /// sale has opened.
    #[error("{0}")]
    NotReservable(&'static str),
    /// 404: no product with that id has been created.
    #[error("unknown product {0}")]
    UnknownProduct(i64),
    /// 404: no route.
    #[error("no such endpoint")]
    NotFound,
    /// 405: the route exists with another method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409: the product has no stock left.
    #[error("sold out")]
    SoldOut,
    /// 409 `sold_out` too: this wave's stock is gone, and another wave
    /// goes on sale later.
    #[error("this wave is sold out; the next opens in {} s", whole_seconds(*.next_in))]
    SoldOutUntil {
        /// How long until the next wave: `seconds_left`, `Retry-After`.
        next_in: Duration,
        /// When it opens (ms since the Unix epoch), as `opens_at_ms`.
        next_at_ms: u64,
    },
    /// 409: the buyer already holds the product's `per_user_limit` units.
    #[error("this buyer has reached the product's per-user limit")]
    LimitReached,
    /// 429: the client's (or everybody's) token bucket is empty.
    #[error("rate limited; retry later")]
    RateLimited {
        /// Sent as `Retry-After`.
        retry_after: Duration,
    },
    /// 503: the lock was not acquired in time, retries ran out or the
    /// service is shedding load; the client may retry after the hint.
    #[error("{message}")]
    Busy {
        /// Why the request was turned away.
        message: String,
        /// Sent as `Retry-After` (whole seconds, at least 1).
        retry_after: Duration,
    },
    /// 503: the sale was sent and not answered (or the request timed out
    /// while its write may still run); the order it would have recorded
    /// is named, when known, so the buyer (and a history check) can look
    /// for it. Retrying with the same `Idempotency-Key` tells which. The
    /// one form an unknown outcome takes in an answer: a backend's
    /// [`BackendError::OutcomeUnknown`] becomes it.
    #[error("outcome unknown: {cause}")]
    OutcomeUnknown {
        /// The order the sale would have recorded.
        order_id: Option<uuid::Uuid>,
        /// What went wrong, for the log.
        cause: String,
    },
    /// 503 from `/readyz`: a backend is unreachable.
    #[error("not ready: {0}")]
    NotReady(String),
    /// A backend failed before anything could have sold. Logged with its
    /// cause; the client sees an opaque message: 503 `unavailable` when a
    /// backend could not be reached or refused before anything ran, 500
    /// `backend` otherwise.
    #[error(transparent)]
    Backend(BackendError),
}

impl From<BackendError> for ApiError {
    fn from(error: BackendError) -> Self {
        match error {
            BackendError::OutcomeUnknown(cause) => Self::OutcomeUnknown {
                order_id: None,
                cause,
            },
            error => Self::Backend(error),
        }
    }
}

impl From<Invalid> for ApiError {
    fn from(Invalid(reason): Invalid) -> Self {
        Self::BadRequest(reason)
    }
}

/// Every machine-readable code a failure body can carry, in one list: the
/// OpenAPI document gives it as the enum of `error.code`, and unit tests
/// hold [`ApiError`]'s codes and the gateway's own error pages to it. The
/// 503s tell a client what it may assume: `busy` (nothing happened, retry),
/// `unavailable` (a backend was down before anything was sent),
/// `outcome_unknown` (the write may have happened: retry with the same
/// `Idempotency-Key` to learn which); 500 `backend` is everything else.
pub const CODES: &[&str] = &[
    "bad_request",
    "unauthorized",
    "forbidden",
    "not_started",
    "not_reserved",
    "unknown_product",
    "not_found",
    "method_not_allowed",
    "ended",
    "sold_out",
    "limit_reached",
    "not_reservable",
    "rate_limited",
    "busy",
    "unavailable",
    "outcome_unknown",
    "not_ready",
    "backend",
];

/// The contract's failure body, `{"error":{"code":…,"message":…}}`: one
/// type for the responses and the OpenAPI document alike.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    error: ErrorDetail,
}

/// The inside of [`ErrorBody`].
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// What a program acts on: one of [`CODES`].
    #[schema(schema_with = code_schema)]
    code: &'static str,
    /// What a person reads; a 500 does not show its cause.
    message: String,
    /// With `outcome_unknown`: the order the sale would have recorded, so
    /// the buyer (or a history check) can look for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    order_id: Option<uuid::Uuid>,
    /// With `not_started`: whole seconds until the sale opens; with
    /// `sold_out` between waves: until the next wave (rounded up, as
    /// `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds_left: Option<u64>,
    /// With `not_started`: the moment the sale opens; with `sold_out`
    /// between waves: the moment the next wave does (ms since the Unix
    /// epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    opens_at_ms: Option<u64>,
}

/// `error.code` in the document: a string from [`CODES`].
fn code_schema() -> Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(CODES.iter().copied()))
        .description(Some("machine-readable error code"))
        .build()
}

impl ApiError {
    /// The contract's status and machine-readable code (one of [`CODES`])
    /// for this error.
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden => (StatusCode::FORBIDDEN, "forbidden"),
            Self::NotStarted { .. } => (StatusCode::FORBIDDEN, "not_started"),
            Self::Ended => (StatusCode::GONE, "ended"),
            Self::NotReserved => (StatusCode::FORBIDDEN, "not_reserved"),
            Self::NotReservable(_) => (StatusCode::CONFLICT, "not_reservable"),
            Self::UnknownProduct(_) => (StatusCode::NOT_FOUND, "unknown_product"),
            Self::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            Self::MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            Self::SoldOut | Self::SoldOutUntil { .. } => (StatusCode::CONFLICT, "sold_out"),
            Self::LimitReached => (StatusCode::CONFLICT, "limit_reached"),
            Self::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
            Self::NotReady(_) => (StatusCode::SERVICE_UNAVAILABLE, "not_ready"),
            Self::OutcomeUnknown { .. } => (StatusCode::SERVICE_UNAVAILABLE, "outcome_unknown"),
            Self::Backend(cause) if cause.is_transport() => {
                (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
            }
            Self::Backend(_) => (StatusCode::INTERNAL_SERVER_ERROR, "backend"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let message = match &self {
            Self::OutcomeUnknown { .. } => {
                tracing::error!(error = %self, "sale outcome unknown");
                "the sale was sent to a backend that did not answer: it may or may not have \
                 happened; retry with the same Idempotency-Key to learn which"
                    .to_owned()
            }
            Self::Backend(cause) if cause.is_transport() => {
                tracing::warn!(error = %cause, "backend unavailable");
                "a backend is unavailable; nothing was sold; retry later".to_owned()
            }
            Self::Backend(cause) => {
                tracing::error!(error = %cause, "backend failure");
                "a backend failed; nothing was sold".to_owned()
            }
            other => other.to_string(),
        };
        let order_id = match &self {
            Self::OutcomeUnknown { order_id, .. } => *order_id,
            _ => None,
        };
        let (seconds_left, opens_at_ms) = match &self {
            Self::NotStarted {
                starts_in: wait,
                opens_at_ms: at,
            }
            | Self::SoldOutUntil {
                next_in: wait,
                next_at_ms: at,
            } => (Some(whole_seconds(*wait)), Some(*at)),
            _ => (None, None),
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code,
                message,
                order_id,
                seconds_left,
                opens_at_ms,
            },
        };
        let mut response = (status, Json(body)).into_response();
        let retry_after = match &self {
            Self::Busy { retry_after, .. }
            | Self::RateLimited { retry_after }
            | Self::NotStarted {
                starts_in: retry_after,
                ..
            }
            | Self::SoldOutUntil {
                next_in: retry_after,
                ..
            } => Some(*retry_after),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(Duration::from_secs(1)),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(whole_seconds(retry_after)),
            );
        }
        if let Self::RateLimited { .. } = &self {
            // The gateway's 429 says "gateway": clients and load reports
            // can tell which layer turned them away.
            response
                .headers_mut()
                .insert(LIMITED_BY, HeaderValue::from_static("service"));
        }
        response
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

    /// One error of each kind. The `match` has no wildcard arm, so a new
    /// variant does not compile until it is listed here too.
    fn one_of_each() -> Vec<ApiError> {
        let all = vec![
            ApiError::BadRequest("x".into()),
            ApiError::Unauthorized,
            ApiError::Forbidden,
            ApiError::UnknownProduct(1),
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::NotStarted {
                starts_in: Duration::from_millis(1_500),
                opens_at_ms: 1_500,
            },
            ApiError::Ended,
            ApiError::NotReserved,
            ApiError::NotReservable("x"),
            ApiError::SoldOut,
            ApiError::SoldOutUntil {
                next_in: Duration::from_secs(2),
                next_at_ms: 2_000,
            },
            ApiError::LimitReached,
            ApiError::RateLimited {
                retry_after: Duration::from_secs(1),
            },
            ApiError::Busy {
                message: "x".into(),
                retry_after: Duration::from_secs(1),
            },
            ApiError::OutcomeUnknown {
                order_id: Some(uuid::Uuid::nil()),
                cause: "x".into(),
            },
            ApiError::NotReady("x".into()),
            ApiError::Backend(BackendError::Corrupt("x".into())),
            ApiError::Backend(BackendError::Unavailable("x".into())),
            ApiError::from(BackendError::OutcomeUnknown("x".into())),
        ];
        for error in &all {
            match error {
                ApiError::BadRequest(_)
                | ApiError::Unauthorized
                | ApiError::Forbidden
                | ApiError::UnknownProduct(_)
                | ApiError::NotFound
                | ApiError::MethodNotAllowed
                | ApiError::NotStarted { .. }
                | ApiError::Ended
                | ApiError::NotReserved
                | ApiError::NotReservable(_)
                | ApiError::SoldOut
                | ApiError::SoldOutUntil { .. }
                | ApiError::LimitReached
                | ApiError::RateLimited { .. }
                | ApiError::Busy { .. }
                | ApiError::OutcomeUnknown { .. }
                | ApiError::NotReady(_)
                | ApiError::Backend(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_error_code_is_listed() {
        for error in one_of_each() {
            let (_, code) = error.status_and_code();
            assert!(CODES.contains(&code), "{code} ({error:?}) is not in CODES");
        }
    }

    #[test]
    fn the_gateway_error_pages_use_listed_codes() {
        let template = include_str!("../nginx/seckill.conf.template");
        let codes: Vec<&str> = template
            .split(r#""code":""#)
            .skip(1)
            .map(|rest| rest.split('"').next().expect("a closing quote"))
            .collect();
        assert!(!codes.is_empty(), "no error pages found in the template");
        for code in codes {
            assert!(
                CODES.contains(&code),
                "the gateway answers {code}, not in CODES"
            );
        }
    }

    #[test]
    fn codes_are_listed_once() {
        let mut sorted = CODES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), CODES.len());
    }
}
