//! The lab's disk faults (`--power-cut-fs`): a power cut of every server
//! at once, and a slow disk under one of them.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::{Lab, READY_TIMEOUT, Ready};

/// The servers whose data lives on the lab's disk.
const ON_DISK: [&str; 7] = [
    "redis",
    "redis-2",
    "redis-3",
    "zookeeper",
    "etcd",
    "mysql",
    "postgres",
];

/// How one server came back after a power cut.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recovery {
    /// The server (`redis`, `postgres`…).
    pub server: String,
    /// It answered again, started from what its files kept.
    pub came_back: bool,
    /// From its restart until it answered, or until it was given up on.
    pub took_ms: u64,
    /// Why it did not come back: its own words, the end of its log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Lab {
    /// The power cut: every server with data on the lab's disk killed
    /// at once (SIGKILL, with every process it started), the disk
    /// brought back to what was fsynced, and every server restarted from
    /// its files alone, all together. The instances live on and are not
    /// told. A server that does not come back is reported, not retried.
    pub async fn power_cut(&mut self) -> anyhow::Result<Vec<Recovery>> {
        anyhow::ensure!(
            self.disk.is_some(),
            "the lab's disk can be cut only with --power-cut-fs"
        );
        let mut probes = Vec::new();
        for name in ON_DISK {
            probes.push((name, self.ready_check(name)?));
        }
        let victims = self
            .processes
            .iter_mut()
            .filter(|p| ON_DISK.contains(&p.name.as_str()));
        futures::future::try_join_all(victims.map(|p| p.kill_tree())).await?;
        self.disk.as_ref().context("no disk")?.cut()?;
        let restarts = self
            .processes
            .iter_mut()
            .filter_map(|process| {
                let (_, ready) = probes.iter().find(|(name, _)| *name == process.name)?;
                Some(async move { recover(process, ready).await })
            })
            .collect::<Vec<_>>();
        let recoveries = futures::future::join_all(restarts).await;
        for info in &mut self.info.processes {
            if let Some(process) = self.processes.iter().find(|p| p.name == info.name) {
                info.pid = process.pid();
            }
        }
        Ok(recoveries)
    }

    /// A slow disk under `server`'s data (`""`: under everything): each
    /// fsync there takes `delay` from now on; `None` makes it fast again.
    pub fn slow_fsync(&self, server: &str, delay: Option<Duration>) -> anyhow::Result<()> {
        let disk = self
            .disk
            .as_ref()
            .context("the lab's disk can be slowed only with --power-cut-fs")?;
        disk.slow_fsync(Path::new(server), delay);
        Ok(())
    }

    /// Slow fsyncs waiting right now (a server inside its fsync).
    pub fn slow_fsyncs_waiting(&self) -> usize {
        self.disk.as_ref().map_or(0, |d| d.slow_fsyncs_waiting())
    }
}

/// Restarts `process` after the cut and waits for `ready`.
async fn recover(process: &mut super::process::Managed, ready: &Ready) -> Recovery {
    let started = Instant::now();
    let result = match process.restart().await {
        Ok(()) => process.wait_ready(READY_TIMEOUT, || ready.answers()).await,
        Err(e) => Err(e),
    };
    Recovery {
        server: process.name.clone(),
        came_back: result.is_ok(),
        took_ms: started.elapsed().as_millis() as u64,
        error: result.err().map(|e| format!("{e:#}")),
    }
}
