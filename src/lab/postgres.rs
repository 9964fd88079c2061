//! A throw-away PostgreSQL cluster: `initdb` into the lab's directory, then
//! the postmaster in the foreground on a loopback port.
//!
//! PostgreSQL refuses to run as root, so when the lab is root the cluster
//! belongs to the `postgres` user (Debian's package creates it).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::Context;
use nix::unistd::User;
use tokio::process::Command;

use super::durability::{Durability, postgres_settings};
use super::find;
use super::process::Managed;

/// The database and user the instances connect as.
pub const DATABASE: &str = "postgres";

/// Initialises a cluster in `data` (its socket and log under `dir`) and
/// starts it on `port`, durable or not as `mode` says.
pub async fn start(
    dir: &Path,
    data: &Path,
    port: u16,
    mode: Durability,
) -> anyhow::Result<Managed> {
    let data = data.to_owned();
    let sockets = dir.join("sockets");
    std::fs::create_dir_all(&sockets)?;
    std::fs::create_dir_all(&data)?;
    let owner = run_as();
    if let Some(user) = &owner {
        for path in [dir, sockets.as_path(), data.as_path()] {
            std::os::unix::fs::chown(path, Some(user.uid.as_raw()), Some(user.gid.as_raw()))?;
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;

    let mut initdb = Command::new(find::postgres("initdb")?);
    initdb
        .arg("-D")
        .arg(&data)
        .arg("-U")
        .arg("postgres")
        .arg("-A")
        .arg("trust")
        .arg("-E")
        .arg("UTF8")
        .arg("--no-sync")
        .arg("--no-instructions");
    as_owner(&mut initdb, owner.as_ref());
    let output = initdb.output().await.context("running initdb")?;
    anyhow::ensure!(
        output.status.success(),
        "initdb failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    let program = find::postgres("postgres")?;
    let settings: Vec<String> = [
        "listen_addresses=127.0.0.1".to_owned(),
        format!("unix_socket_directories={}", sockets.display()),
        "max_connections=400".to_owned(),
        "shared_buffers=128MB".to_owned(),
    ]
    .into_iter()
    .chain(postgres_settings(mode).iter().map(|s| (*s).to_owned()))
    .collect();
    let recipe = move || {
        let mut postgres = Command::new(&program);
        postgres
            .arg("-D")
            .arg(&data)
            .arg("-p")
            .arg(port.to_string());
        for setting in &settings {
            postgres.arg("-c").arg(setting);
        }
        as_owner(&mut postgres, owner.as_ref());
        postgres
    };
    Managed::restartable("postgres", Box::new(recipe), &dir.join("postgres.log"))
}

/// The URL the instances use.
pub fn url(port: u16) -> String {
    format!("postgres://postgres@127.0.0.1:{port}/{DATABASE}")
}

/// Accepts a connection and answers a query.
pub async fn ready(url: &str) -> bool {
    use sqlx::Connection;
    match sqlx::PgConnection::connect(url).await {
        Ok(mut conn) => sqlx::query("SELECT 1").execute(&mut conn).await.is_ok(),
        Err(_) => false,
    }
}

/// The `postgres` user when running as root; `None` otherwise.
fn run_as() -> Option<User> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    User::from_name("postgres").ok().flatten()
}

fn as_owner(command: &mut Command, owner: Option<&User>) {
    if let Some(user) = owner {
        command
            .uid(user.uid.as_raw())
            .gid(user.gid.as_raw())
            .env("HOME", &user.dir)
            .current_dir(&user.dir);
    }
}
