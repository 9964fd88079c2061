//! A throw-away redis-server on loopback, persisting as the lab's
//! [`Durability`] says.

use std::path::Path;

use tokio::process::Command;

use super::durability::{AofFsync, Durability, redis_args};
use super::find;
use super::process::Managed;

/// Starts redis-server on `port` with its files under `dir` (where a
/// restart finds its AOF again).
pub fn start(
    dir: &Path,
    name: &str,
    port: u16,
    mode: Durability,
    fsync: AofFsync,
) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let program = find::redis_server()?;
    let data = dir.to_owned();
    let recipe = move || {
        let mut command = Command::new(&program);
        command
            .arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .args(redis_args(mode, fsync))
            .arg("--dir")
            .arg(&data)
            .arg("--maxclients")
            .arg("10000");
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
