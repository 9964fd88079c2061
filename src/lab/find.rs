//! Where the servers' binaries live: PATH and Debian's usual places
//! (`/usr/sbin` for nginx, `/usr/lib/postgresql/<version>/bin` for
//! PostgreSQL, which Debian keeps off PATH).

use std::path::{Path, PathBuf};

/// nginx: PATH, then /usr/sbin.
pub fn nginx() -> anyhow::Result<PathBuf> {
    search("nginx", path_dirs().chain([PathBuf::from("/usr/sbin")]))
}

/// redis-server: PATH, then /usr/bin.
pub fn redis_server() -> anyhow::Result<PathBuf> {
    search(
        "redis-server",
        path_dirs().chain([PathBuf::from("/usr/bin")]),
    )
}

/// etcd (Debian's etcd-server): PATH, then /usr/bin.
pub fn etcd() -> anyhow::Result<PathBuf> {
    search("etcd", path_dirs().chain([PathBuf::from("/usr/bin")]))
}

/// A MariaDB server binary (`mariadbd`, `mariadb-install-db`): PATH, then
/// /usr/sbin (the server) and /usr/bin (the installer).
pub fn mariadb(name: &str) -> anyhow::Result<PathBuf> {
    search(
        name,
        path_dirs().chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")]),
    )
}

/// A program Debian installs in /usr/bin (Prometheus and its nginx
/// exporter): PATH, then /usr/bin.
pub fn in_path(name: &str) -> anyhow::Result<PathBuf> {
    search(name, path_dirs().chain([PathBuf::from("/usr/bin")]))
}

/// redis-cli (Debian's redis-tools, which redis-server depends on): PATH,
/// then /usr/bin.
pub fn redis_cli() -> anyhow::Result<PathBuf> {
    search("redis-cli", path_dirs().chain([PathBuf::from("/usr/bin")]))
}

/// A PostgreSQL server binary (`initdb`, `postgres`): the newest
/// `/usr/lib/postgresql/<version>/bin` first, so `initdb` and `postgres`
/// come from the same major version, then PATH.
pub fn postgres(name: &str) -> anyhow::Result<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .collect();
    versions.sort();
    search(
        name,
        versions
            .into_iter()
            .rev()
            .map(|(_, dir)| dir)
            .chain(path_dirs()),
    )
}

fn path_dirs() -> impl Iterator<Item = PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).collect::<Vec<_>>().into_iter()
}

fn search(name: &str, dirs: impl Iterator<Item = PathBuf>) -> anyhow::Result<PathBuf> {
    dirs.map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| anyhow::anyhow!("{name} not found; install it (scripts/deps.sh does)"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
