//! A throw-away redis-server on loopback, persisting as the lab's
//! [`Durability`] says: alone, or as one [`Node`] of a Sentinel topology
//! or a cluster.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::durability::{Durability, redis_args};
use super::process::Managed;
use super::{find, free_port};

/// How long a server may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// One server of a topology.
pub struct Node {
    /// The process, to freeze, resume or kill it.
    pub process: Managed,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Node {
    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

/// Starts a redis-server named `name` on a free port, its files under
/// `dir/name`, with `extra` arguments, and waits until it answers. A
/// cluster node gets a free port of its own for the cluster bus too:
/// left to its default, port + 10000, the bus lands on a port nothing
/// reserved, which another lab's server may hold.
pub async fn node(
    dir: &Path,
    name: &str,
    mode: Durability,
    extra: &[String],
) -> anyhow::Result<Node> {
    let port = free_port()?;
    let mut extra = extra.to_vec();
    if extra.iter().any(|a| a == "--cluster-enabled") {
        extra.extend(["--cluster-port".to_owned(), free_port()?.to_string()]);
    }
    let mut node = Node {
        process: start_with(&dir.join(name), name, port, mode, &extra)?,
        addr: loopback(port),
    };
    let url = node.url();
    node.process
        .wait_ready(READY_TIMEOUT, || ready(&url))
        .await?;
    Ok(node)
}

/// `127.0.0.1:port`: numeric loopback only, so what a server announces
/// (to sentinels, to cluster peers) is what the others reach.
pub fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Starts redis-server on `port` with its files under `dir` (where a
/// restart finds its AOF again).
pub fn start(dir: &Path, name: &str, port: u16, mode: Durability) -> anyhow::Result<Managed> {
    start_with(dir, name, port, mode, &[])
}

/// [`start`] with `extra` arguments (cluster mode, say).
fn start_with(
    dir: &Path,
    name: &str,
    port: u16,
    mode: Durability,
    extra: &[String],
) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let program = find::redis_server()?;
    let data = dir.to_owned();
    let extra = extra.to_vec();
    let recipe = move || {
        let mut command = Command::new(&program);
        command
            .arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .args(redis_args(mode))
            .arg("--dir")
            .arg(&data)
            .arg("--maxclients")
            .arg("10000")
            .args(&extra);
        command
    };
    Managed::restartable(name, Box::new(recipe), &dir.join("redis.log"))
}

/// PING answers PONG.
pub async fn ready(url: &str) -> bool {
    let Ok(client) = redis::Client::open(url) else {
        return false;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return false;
    };
    redis::cmd("PING")
        .query_async::<String>(&mut conn)
        .await
        .is_ok()
}
