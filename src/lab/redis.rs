//! A throw-away redis-server: no persistence, loopback only.

use std::path::Path;

use tokio::process::Command;

use super::find;
use super::process::Managed;

/// Starts redis-server on `port` with its files under `dir`.
pub fn start(dir: &Path, name: &str, port: u16) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let mut command = Command::new(find::redis_server()?);
    command
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--save")
        .arg("")
        .arg("--appendonly")
        .arg("no")
        .arg("--dir")
        .arg(dir)
        .arg("--maxclients")
        .arg("10000");
    Managed::spawn(name, command, &dir.join("redis.log"))
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
