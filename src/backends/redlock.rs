//! One independent RedLock master: a connection handle, like the pools in
//! [`super::Backends`]. The RedLock algorithm itself is in
//! `lock::redlock`, a layer up.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;

use crate::backends::failure::BackendError;

/// How long one master may take to answer before it counts as a failure:
/// small against the TTL, as the algorithm asks, so a dead master costs
/// milliseconds.
pub const PER_MASTER: Duration = Duration::from_millis(100);

/// One independent master: a shared multiplexed connection, opened on
/// first use and reopened after a failure. No pool checkout (and its ping)
/// per command: an acquisition is one round trip per master.
pub struct Master {
    client: redis::Client,
    conn: tokio::sync::Mutex<Option<MultiplexedConnection>>,
    /// After a failure the master is skipped for [`REST`], so waiters do not
    /// queue behind reconnects to a master that is down. A std mutex: held
    /// for a read or a write of an instant, never across an await.
    down_until: std::sync::Mutex<Option<Instant>>,
}

/// How long a failed master is skipped before it is tried again.
const REST: Duration = Duration::from_millis(250);

impl Master {
    /// A master at `url` (not connected yet).
    pub fn new(url: &str) -> Result<Self, BackendError> {
        Ok(Self {
            client: redis::Client::open(super::master::connection_info(url)?)?,
            conn: tokio::sync::Mutex::new(None),
            down_until: std::sync::Mutex::new(None),
        })
    }

    /// Deletes `key` on this master (a reset clearing the product's lock).
    pub async fn del(&self, key: &str) -> Result<(), BackendError> {
        self.run(|mut conn| async move {
            let _: i64 = redis::AsyncCommands::del(&mut conn, key).await?;
            Ok(())
        })
        .await
    }

    /// Runs `op` on this master's connection; a failure drops the
    /// connection so the next call reconnects.
    pub async fn run<T, F, Fut>(&self, op: F) -> Result<T, BackendError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, BackendError>>,
    {
        let resting = {
            let down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
            down.is_some_and(|until| Instant::now() < until)
        };
        if resting {
            return Err(BackendError::Unavailable(
                "redlock master recently failed".into(),
            ));
        }
        let result = self.run_connected(op).await;
        if result.is_err() {
            *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(Instant::now() + REST);
        }
        result
    }

    async fn run_connected<T, F, Fut>(&self, op: F) -> Result<T, BackendError>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = Result<T, BackendError>>,
    {
        let conn = {
            let mut slot = self.conn.lock().await;
            match &*slot {
                Some(conn) => conn.clone(),
                None => {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(PER_MASTER))
                        .set_response_timeout(Some(PER_MASTER));
                    let conn = tokio::time::timeout(
                        PER_MASTER,
                        self.client
                            .get_multiplexed_async_connection_with_config(&config),
                    )
                    .await
                    .map_err(|_| {
                        BackendError::Unavailable("redlock master connect timed out".into())
                    })??;
                    *slot = Some(conn.clone());
                    conn
                }
            }
        };
        let result = op(conn).await;
        if result.is_err() {
            *self.conn.lock().await = None;
        }
        result
    }
}
