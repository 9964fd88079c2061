//! A ZooKeeper session that outlives its own expiry. A session ends for
//! good when the server stops hearing from the client for its timeout — a
//! frozen process, a partition — and a client of an ended session fails
//! every call from then on. A real service opens a new session and goes
//! on (the old one's ephemeral lock nodes are gone with it, which is the
//! point); without this, one long pause would break the `zookeeper`
//! strategy on that instance until it restarts.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use zookeeper_client::Client;

use crate::backends::failure::BackendError;

/// The instance's ZooKeeper session, replaced when it has ended.
#[derive(Clone)]
pub struct ZkSession {
    hosts: String,
    timeout: Duration,
    current: Arc<Mutex<Client>>,
}

impl ZkSession {
    /// Opens the first session.
    pub async fn connect(hosts: &str, timeout: Duration) -> Result<Self, BackendError> {
        let client = open(hosts, timeout).await?;
        Ok(Self {
            hosts: hosts.to_owned(),
            timeout,
            current: Arc::new(Mutex::new(client)),
        })
    }

    /// The live session's client; a new session when the last one ended
    /// (expired, closed). A session that is only disconnected is kept: the
    /// client reconnects it within its timeout by itself.
    pub async fn client(&self) -> Result<Client, BackendError> {
        let mut current = self.current.lock().await;
        if current.state().is_terminated() {
            tracing::warn!(state = ?current.state(), "zookeeper session ended; opening a new one");
            *current = open(&self.hosts, self.timeout).await?;
        }
        Ok(current.clone())
    }
}

async fn open(hosts: &str, timeout: Duration) -> Result<Client, BackendError> {
    Client::connector()
        .with_session_timeout(timeout)
        .connect(hosts)
        .await
        .map_err(|e| BackendError::ZooKeeper(format!("connecting to {hosts}: {e}")))
}
