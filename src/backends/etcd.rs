//! The instance's etcd client, for the `etcd` lease lock.
//!
//! One gRPC channel per instance, shared by every buyer: an
//! `etcd_client::Client` is a handle onto it, cloned per call (its
//! methods take `&mut self`). No per-request timeout is set here — a lock
//! request waits as long as its buyer may wait, so each call bounds
//! itself.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};

use crate::backends::failure::BackendError;

/// Connects to etcd at `endpoints` (`host:port`, comma-separated). The
/// channel connects lazily and reconnects by itself.
pub async fn connect(endpoints: &str) -> Result<Client, BackendError> {
    let urls: Vec<String> = endpoints
        .split(',')
        .map(|e| match e.contains("://") {
            true => e.to_owned(),
            false => format!("http://{e}"),
        })
        .collect();
    let options = ConnectOptions::new().with_connect_timeout(Duration::from_secs(2));
    Client::connect(&urls, Some(options))
        .await
        .map_err(|e| BackendError::Etcd(format!("connecting to {endpoints}: {e}")))
}
