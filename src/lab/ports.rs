//! Free loopback ports for the lab's servers, handed out once across every
//! process on the machine.
//!
//! Asking the OS for port 0 and closing the probe leaves a window in which
//! another lab — a separate `seckill lab` process of a test binary running
//! beside this one — is handed the same port before the first server has
//! bound it (seen in CI: ZooKeeper's JVM, slow to bind, lost its client
//! port). And the OS hands port-0 probes out of the ephemeral range, where
//! every outgoing connection's source port lives too. So a port here is
//! drawn from below the ephemeral range, probed, and reserved by creating a
//! marker file exclusively in a directory all processes share; a marker
//! older than [`STALE`] is taken back (its lab is long gone, or its server
//! still holds the port and the probe says so).

use std::fs::OpenOptions;
use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rand::Rng;

/// Where the ports are drawn from: below Linux's default ephemeral range
/// (32768–60999), above the well-known servers' ports.
const RANGE: std::ops::Range<u16> = 20_000..32_768;

/// How long a marker reserves its port: long past the moment its server
/// binds, after which the probe itself finds the port taken.
const STALE: Duration = Duration::from_secs(600);

/// A port that is free now and that no other caller on this machine was
/// handed within [`STALE`].
pub fn free_port() -> anyhow::Result<u16> {
    let dir = std::env::temp_dir().join("seckill-ports");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut rng = rand::rng();
    for _ in 0..1000 {
        let port = rng.random_range(RANGE);
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        if reserve(dir.join(port.to_string()))? {
            return Ok(port);
        }
    }
    anyhow::bail!("no free port in {RANGE:?} after 1000 tries")
}

/// Creates the marker; false when another caller holds it.
fn reserve(marker: PathBuf) -> anyhow::Result<bool> {
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&marker)
    };
    match create() {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let age = std::fs::metadata(&marker)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok());
            if age.is_some_and(|age| age > STALE) {
                // Taken back: refresh the marker's time as this caller's.
                std::fs::remove_file(&marker).ok();
                return Ok(create().is_ok());
            }
            Ok(false)
        }
        Err(e) => Err(e).with_context(|| format!("reserving {}", marker.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_port_is_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| free_port().unwrap()).collect();
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
        assert!(ports.iter().all(|p| RANGE.contains(p)));
    }
}
