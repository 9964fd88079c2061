//! A throw-away single-member etcd (Debian's `etcd-server`), for the
//! `etcd` lease lock.
//!
//! Raft's timers are shortened (10 ms heartbeat, 100 ms election timeout)
//! for one reason: etcd refuses lease TTLs below 1.5 election timeouts,
//! and with the defaults (1 s) a 1 s lease would silently become 2 s. The
//! member is alone, so no election ever waits on them. etcd fsyncs its
//! write-ahead log on every commit in both of the lab's durability modes:
//! 3.4 has no switch to turn that off, and a lock service is the last
//! place to want one.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::find;
use super::process::Managed;

/// Starts etcd with its log under `dir`, its data in `data` (where a
/// restart finds it), clients on `port` and its peer listener on
/// `peer_port` (loopback only).
pub fn start(dir: &Path, data: &Path, port: u16, peer_port: u16) -> anyhow::Result<Managed> {
    let etcd = find::etcd()?;
    std::fs::create_dir_all(dir)?;
    std::fs::create_dir_all(data.parent().unwrap_or(data))?;
    let data = data.to_owned();
    let client = format!("http://127.0.0.1:{port}");
    let peer = format!("http://127.0.0.1:{peer_port}");
    let recipe = move || {
        let mut command = Command::new(&etcd);
        command
            .arg("--name=lab")
            .arg(format!("--data-dir={}", data.display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=lab={peer}"))
            .arg("--heartbeat-interval=10")
            .arg("--election-timeout=100")
            .arg("--log-level=warn")
            .arg("--logger=zap");
        command
    };
    Managed::restartable("etcd", Box::new(recipe), &dir.join("etcd.log"))
}

/// `/health` answers `"health":"true"`: a leader is elected and the
/// member serves requests.
pub async fn ready(port: u16) -> bool {
    let client = match reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(1))
        .build()
    {
        Ok(client) => client,
        Err(_) => return false,
    };
    let answer = client
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await;
    match answer {
        Ok(response) => response
            .text()
            .await
            .is_ok_and(|body| body.contains("\"health\":\"true\"")),
        Err(_) => false,
    }
}
