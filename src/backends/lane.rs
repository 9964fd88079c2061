//! The buy path's Redis connection: one multiplexed connection that every
//! buy of this instance shares, replaced when it breaks.
//!
//! Why not a pool checkout per buy: deadpool checks a connection out with
//! a `PING` (a `ROLE` with sentinels), one more round trip per sale, and a
//! buy held its connection alone. A multiplexed connection pipelines the
//! commands of every concurrent buy on one socket for free: fewer system
//! calls in the instance and in Redis, which reads many commands per wake.
//! Nothing on the buy path blocks the connection (no `BLPOP`, no
//! `WATCH`), which is what makes sharing it safe.
//!
//! What the ping used to catch, a connection already dead, is known here
//! without a round trip: the connection speaks RESP3, so redis-rs tells
//! its push sender the moment it sees the socket close (a crashed Redis,
//! Sentinel's `CLIENT KILL` at a failover), and the next buy connects anew
//! instead of sending into it. A connection refused then is `unavailable`
//! (nothing sent). Errors that leave the socket open — a timeout, a
//! `READONLY` from a demoted master — retire the connection through the
//! buy that saw them: the connection retires itself when a result it
//! produced says so ([`LaneConn::checked`]). The buys that were on a
//! connection when it died get the answer their step deserves
//! (`outcome_unknown` at the selling step).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::conn::RedisConn;
use redis::{AsyncConnectionConfig, ProtocolVersion, PushInfo, PushKind};

use super::master::MainRedis;
use crate::backends::failure::BackendError;

/// Longest wait for a new connection (a sentinel lookup included).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The lane's slot: the connection of the moment. A std mutex: held for
/// a clone, never across an await.
type Slot = Mutex<Option<LaneConn>>;

/// The shared connection, made on first use and after every retirement.
pub struct Lane {
    main: MainRedis,
    /// The connection of the moment and its generation.
    current: Arc<Slot>,
    /// One connect at a time: after a retirement, the buys that arrive
    /// wait for the one new connection instead of each making their own.
    connecting: tokio::sync::Mutex<u64>,
}

/// The lane's connection as one buy holds it: the connection (clones
/// share it) and its generation, which [`LaneConn::checked`] checks so
/// that a late error from an old connection never retires its
/// replacement.
#[derive(Clone)]
pub struct LaneConn {
    /// The shared multiplexed connection.
    pub conn: RedisConn,
    generation: u64,
    /// Set by redis-rs when the connection closed.
    closed: Arc<AtomicBool>,
    /// The lane's slot, to retire itself from (weak: the slot holds this
    /// connection).
    slot: Weak<Slot>,
}

impl Lane {
    /// A lane to the main Redis; connects on first use.
    pub fn new(main: MainRedis) -> Self {
        Self {
            main,
            current: Arc::new(Mutex::new(None)),
            connecting: tokio::sync::Mutex::new(0),
        }
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<LaneConn>> {
        lock(&self.current)
    }

    /// The connection of the moment, connecting if there is none.
    pub async fn get(&self) -> Result<LaneConn, BackendError> {
        if let Some(conn) = self.open() {
            return Ok(conn);
        }
        let mut generations = self.connecting.lock().await;
        if let Some(conn) = self.open() {
            return Ok(conn);
        }
        let closed = Arc::new(AtomicBool::new(false));
        let config = AsyncConnectionConfig::new().set_push_sender({
            let closed = closed.clone();
            move |push: PushInfo| {
                if push.kind == PushKind::Disconnection {
                    closed.store(true, Ordering::Release);
                }
                Ok::<(), std::convert::Infallible>(())
            }
        });
        let conn = tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.main.connect(ProtocolVersion::RESP3, &config),
        )
        .await
        .map_err(|_| BackendError::Unavailable("no redis connection within 2 s".into()))??;
        *generations += 1;
        let conn = LaneConn {
            conn,
            generation: *generations,
            closed,
            slot: Arc::downgrade(&self.current),
        };
        *self.slot() = Some(conn.clone());
        Ok(conn)
    }

    /// The current connection, unless redis-rs has seen it close.
    fn open(&self) -> Option<LaneConn> {
        self.slot()
            .clone()
            .filter(|c| !c.closed.load(Ordering::Acquire))
    }
}

fn lock(slot: &Slot) -> std::sync::MutexGuard<'_, Option<LaneConn>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl LaneConn {
    /// `result`, after retiring this connection from the lane if the
    /// error says it is broken or no longer talks to the master (and it
    /// is still the lane's current one): the next buy connects anew.
    pub fn checked<T>(&self, result: Result<T, BackendError>) -> Result<T, BackendError> {
        if let Err(error) = &result
            && error.breaks_redis_connection()
            && let Some(slot) = self.slot.upgrade()
        {
            let mut current = lock(&slot);
            if current
                .as_ref()
                .is_some_and(|c| c.generation == self.generation)
            {
                tracing::warn!(%error, "the buy path's redis connection is retired");
                *current = None;
            }
        }
        result
    }
}
