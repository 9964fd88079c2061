//! A throw-away MariaDB (Debian's `mariadb-server`, MySQL's InnoDB), for
//! the `mysql` store: `mariadb-install-db` into the lab's directory, then
//! `mariadbd` in the foreground on a loopback port, its socket in the lab's
//! directory, reading no configuration file but its flags (`--no-defaults`),
//! so the machine's own MariaDB, if any, is never touched.

use std::path::Path;

use anyhow::Context;
use tokio::process::Command;

use super::durability::{Durability, mysql_settings};
use super::find;
use super::process::Managed;

/// The database the instances use (created once the server answers, by
/// [`ready`]'s statement, which names it literally).
pub const DATABASE: &str = "seckill";

/// Initialises a data directory in `data` (its socket, pid file and
/// temporary files under `dir`) and starts the server on `port`, durable
/// or not as `mode` says.
pub async fn start(
    dir: &Path,
    data: &Path,
    port: u16,
    mode: Durability,
) -> anyhow::Result<Managed> {
    let data = data.to_owned();
    // Its own temporary directory: two labs bootstrapping at once in the
    // shared /tmp collide on InnoDB's temporary tables (seen: one
    // mariadb-install-db in three failed, "Unknown table
    // 'mysql.tmp_proxies_priv'"; none in ten with a directory each).
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&tmp)?;
    // Running as root, the server must be told so (it refuses otherwise).
    let user: &[&str] = if nix::unistd::geteuid().is_root() {
        &["--user=root"]
    } else {
        &[]
    };
    let output = Command::new(find::mariadb("mariadb-install-db")?)
        .arg("--no-defaults")
        .arg(format!("--datadir={}", data.display()))
        .arg(format!("--tmpdir={}", tmp.display()))
        .arg("--auth-root-authentication-method=normal")
        .arg("--skip-test-db")
        .args(user)
        .output()
        .await
        .context("running mariadb-install-db")?;
    anyhow::ensure!(
        output.status.success(),
        "mariadb-install-db failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let program = find::mariadb("mariadbd")?;
    let socket = dir.join("mysqld.sock");
    let args: Vec<String> = [
        "--no-defaults".to_owned(),
        format!("--datadir={}", data.display()),
        format!("--tmpdir={}", tmp.display()),
        format!("--port={port}"),
        "--bind-address=127.0.0.1".to_owned(),
        format!("--socket={}", socket.display()),
        format!("--pid-file={}", dir.join("mysqld.pid").display()),
        "--skip-name-resolve".to_owned(),
        "--max-connections=400".to_owned(),
        "--innodb-buffer-pool-size=128M".to_owned(),
    ]
    .into_iter()
    .chain(user.iter().map(|u| (*u).to_owned()))
    .chain(mysql_settings(mode).iter().map(|s| (*s).to_owned()))
    .collect();
    let recipe = move || {
        let mut server = Command::new(&program);
        server.args(&args);
        server
    };
    Managed::restartable("mysql", Box::new(recipe), &dir.join("mysql.log"))
}

/// The URL the instances use.
pub fn url(port: u16) -> String {
    format!("mysql://root@127.0.0.1:{port}/{DATABASE}")
}

/// Accepts a connection as root and has the instances' database (made
/// here, the first time).
pub async fn ready(port: u16) -> bool {
    use sqlx::Connection;
    let server = format!("mysql://root@127.0.0.1:{port}");
    match sqlx::MySqlConnection::connect(&server).await {
        Ok(mut conn) => sqlx::query("CREATE DATABASE IF NOT EXISTS seckill")
            .execute(&mut conn)
            .await
            .is_ok(),
        Err(_) => false,
    }
}
