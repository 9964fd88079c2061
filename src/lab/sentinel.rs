//! Redis with a replica and three Sentinels: the failover at the heart of
//! the RedLock debate. A lock (or a sale) acknowledged by the master and
//! not yet copied to the replica is gone once Sentinel promotes that
//! replica: replication is asynchronous, so a failover can lose
//! acknowledged writes, and a second client can then take "the same" lock.
//!
//! The topology is small but real: a master, one replica following it,
//! and three sentinels (quorum 2) started as `redis-server <conf>
//! --sentinel` (the same binary as Debian's `redis-sentinel`). Timings are
//! shortened so a fault plays out in seconds, not minutes: see
//! [`Topology::start`].

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use super::durability::Durability;
use super::process::Managed;
use super::redis::{self as server, Node, READY_TIMEOUT, loopback};
use super::{Lab, find, free_port};

/// The name the sentinels know the master by (`SENTINEL MASTER <name>`),
/// and what a Sentinel-aware client asks for.
pub const MASTER_NAME: &str = "seckill";

/// How many sentinels must agree that the master is down: a majority of
/// the three.
const QUORUM: usize = 2;

/// How long the master may stay silent before a sentinel suspects it
/// (Redis's default is 30 s).
const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// How long a failover may take before another sentinel may try again
/// (default 3 minutes).
const FAILOVER_TIMEOUT: Duration = Duration::from_millis(3000);

/// How long the master keeps a replica that has not acknowledged anything
/// (`repl-timeout`, default 60 s), in seconds. A replica frozen for longer
/// is dropped, and the master goes on acknowledging writes it alone holds.
const REPL_TIMEOUT_SECS: u64 = 2;

/// A master, its replica and three sentinels watching them. The fields are
/// public so a lab can take the processes over (to signal them by name).
pub struct Topology {
    /// Where writes go until a failover (`redis-master`).
    pub master: Node,
    /// Follows the master; promoted by the sentinels when the master dies
    /// (`redis-replica`).
    pub replica: Node,
    /// Three sentinels (`sentinel-1` to `sentinel-3`).
    pub sentinels: Vec<Node>,
}

impl Topology {
    /// Starts the topology under `dir` on free loopback ports and waits
    /// until it is whole: the replica's link to the master is up, and each
    /// sentinel sees the master, its replica and the two other sentinels
    /// (they find each other through the master's hello channel, every
    /// 2 s, which is most of the ~2 s this takes).
    ///
    /// Shortened timings, so that faults play out in seconds: a sentinel
    /// suspects a master silent for 1 s and a failover may take 3 s; the
    /// first master drops a replica silent for 2 s (`repl-timeout`; a
    /// promoted replica keeps Redis's 60 s) and starts a replica's full
    /// sync at once (Redis 7 waits 5 s for more replicas to share a
    /// diskless sync). The replica is told to follow with `REPLICAOF`
    /// once the master is configured, which lets both start as the lab's
    /// plain Redis does.
    /// Both Redis servers persist as `mode` says, like the
    /// lab's others.
    pub async fn start(dir: &Path, mode: Durability) -> anyhow::Result<Self> {
        let master = server::node(dir, "redis-master", mode, &[]).await?;
        command::<()>(
            &master.url(),
            redis::cmd("CONFIG")
                .arg("SET")
                .arg("repl-diskless-sync-delay")
                .arg(0)
                .arg("repl-timeout")
                .arg(REPL_TIMEOUT_SECS),
        )
        .await
        .context("configuring the master")?;

        let mut replica = server::node(dir, "redis-replica", mode, &[]).await?;
        command::<()>(
            &replica.url(),
            redis::cmd("REPLICAOF")
                .arg(master.addr.ip().to_string())
                .arg(master.addr.port()),
        )
        .await
        .context("making the replica follow the master")?;
        let url = replica.url();
        replica
            .process
            .wait_ready(READY_TIMEOUT, || async {
                replication(&url).await.is_ok_and(|r| r.link_up)
            })
            .await?;

        // After the replica: a sentinel learns of replicas from the
        // master's INFO, which it asks for only every 10 s once started.
        let mut sentinels = Vec::new();
        for index in 1..=3 {
            let name = format!("sentinel-{index}");
            let port = free_port()?;
            let process = start_sentinel(&dir.join(&name), &name, port, master.addr)?;
            sentinels.push(Node {
                process,
                addr: loopback(port),
            });
        }
        for sentinel in &mut sentinels {
            let url = sentinel.url();
            sentinel
                .process
                .wait_ready(READY_TIMEOUT, || sentinel_sees_all(&url))
                .await?;
        }
        Ok(Self {
            master,
            replica,
            sentinels,
        })
    }

    /// The sentinels' URLs: what a Sentinel-aware client is given instead
    /// of the master's (`redis::sentinel::SentinelClient::build`).
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(Node::url).collect()
    }

    /// Stops the sentinels first (so that stopping the master does not
    /// start a failover), then the replica and the master.
    pub async fn stop(self) {
        let grace = Duration::from_secs(5);
        for sentinel in self.sentinels {
            sentinel.process.stop(grace).await;
        }
        self.replica.process.stop(grace).await;
        self.master.process.stop(grace).await;
    }
}

/// Where the lab's topology is, when the lab runs its main Redis this way
/// (`seckill lab --redis-sentinel`; [`super::LabInfo::sentinel`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SentinelInfo {
    /// The name the sentinels know the master by.
    pub master_name: String,
    /// The master when the lab started (`redis-master`; also
    /// [`super::LabInfo::redis_url`]).
    pub master_url: String,
    /// Its replica (`redis-replica`), the server a failover promotes.
    pub replica_url: String,
    /// The sentinels' `host:port`s, as the instances are given them.
    pub sentinels: Vec<String>,
}

impl Lab {
    /// Starts the main Redis as a [`Topology`] and takes its processes
    /// over by their names, so a scenario can freeze, resume or kill each.
    ///
    /// RedLock's masters stay what the lab always makes them: the main
    /// Redis first, then `redis-2` and `redis-3`, each at a fixed address.
    /// RedLock is defined over *independent* masters with no replication
    /// and no failover, so its client (like any RedLock client) does not
    /// follow Sentinel; its first master is the topology's first master,
    /// at that address. A failover therefore costs RedLock one master of
    /// three — the minority its quorum is there to survive — while
    /// everything else on the main Redis moves to the promoted replica.
    pub(super) async fn start_sentinel_topology(&mut self) -> anyhow::Result<()> {
        let Topology {
            master,
            replica,
            sentinels,
        } = Topology::start(&self.info.dir.join("sentinel"), self.info.durability).await?;
        self.info.redlock_urls.push(master.url());
        self.info.sentinel = Some(SentinelInfo {
            master_name: MASTER_NAME.to_owned(),
            master_url: master.url(),
            replica_url: replica.url(),
            sentinels: sentinels.iter().map(|s| s.addr.to_string()).collect(),
        });
        // Master first: the lab stops its processes newest first, so the
        // sentinels stop before the master and start no failover.
        for node in [master, replica].into_iter().chain(sentinels) {
            self.adopt(node.process);
        }
        Ok(())
    }
}

/// A server's view of replication, from `INFO replication`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// `master` or `slave`.
    pub role: String,
    /// Bytes of the replication stream this server has produced (a
    /// master) or applied (a replica): equal offsets mean the replica holds
    /// every write the master acknowledged.
    pub offset: u64,
    /// A replica: its link to the master is up. A master: always false.
    pub link_up: bool,
    /// A master: how many replicas it is streaming to now.
    pub connected_replicas: u64,
}

/// Asks a Redis server (master or replica) where its replication stands.
pub async fn replication(url: &str) -> anyhow::Result<Replication> {
    let info: String = command(url, redis::cmd("INFO").arg("replication")).await?;
    let fields: HashMap<&str, &str> = info
        .lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .collect();
    let number = |key: &str| -> anyhow::Result<u64> {
        fields
            .get(key)
            .with_context(|| format!("INFO replication has no {key}"))?
            .parse()
            .with_context(|| format!("INFO replication's {key}"))
    };
    Ok(Replication {
        role: fields
            .get("role")
            .context("INFO replication has no role")?
            .to_string(),
        offset: number("master_repl_offset")?,
        link_up: fields.get("master_link_status") == Some(&"up"),
        connected_replicas: number("connected_slaves")?,
    })
}

/// The master a sentinel names now (`SENTINEL get-master-addr-by-name`):
/// during a failover sentinels may disagree for a moment.
pub async fn master_addr(sentinel_url: &str) -> anyhow::Result<SocketAddr> {
    let named: Option<(String, u16)> = command(
        sentinel_url,
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(MASTER_NAME),
    )
    .await?;
    let (ip, port) = named.with_context(|| format!("{sentinel_url} knows no {MASTER_NAME}"))?;
    let ip: IpAddr = ip.parse().with_context(|| format!("master address {ip}"))?;
    Ok(SocketAddr::new(ip, port))
}

/// Waits until every sentinel names the same master, other than
/// `old_master`, and that server says it is a master; returns it. Fails
/// after `timeout` with what each sentinel names.
pub async fn wait_failover(
    sentinel_urls: &[String],
    old_master: SocketAddr,
    timeout: Duration,
) -> anyhow::Result<SocketAddr> {
    let started = Instant::now();
    loop {
        let mut named = Vec::new();
        for url in sentinel_urls {
            named.push(master_addr(url).await.ok());
        }
        if let Some(Some(new)) = named.first().copied()
            && new != old_master
            && named.iter().all(|n| *n == Some(new))
            && replication(&format!("redis://{new}"))
                .await
                .is_ok_and(|r| r.role == "master")
        {
            return Ok(new);
        }
        if started.elapsed() > timeout {
            anyhow::bail!(
                "no failover from {old_master} after {timeout:?}; the sentinels name {named:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a sentinel watching `master`. Sentinel rewrites its configuration
/// file (it records the other sentinels, the replicas and each failover),
/// so the file is its own, under `dir`.
fn start_sentinel(
    dir: &Path,
    name: &str,
    port: u16,
    master: SocketAddr,
) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let config = dir.join("sentinel.conf");
    // Numeric loopback addresses only, so neither `resolve-hostnames` nor
    // `announce-ip` is needed: what a sentinel announces is what the
    // others reach.
    std::fs::write(
        &config,
        format!(
            "port {port}\n\
             bind 127.0.0.1\n\
             dir {dir}\n\
             sentinel monitor {MASTER_NAME} {ip} {master_port} {QUORUM}\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down_after}\n\
             sentinel failover-timeout {MASTER_NAME} {failover_timeout}\n",
            dir = dir.display(),
            ip = master.ip(),
            master_port = master.port(),
            down_after = DOWN_AFTER.as_millis(),
            failover_timeout = FAILOVER_TIMEOUT.as_millis(),
        ),
    )
    .with_context(|| format!("writing {}", config.display()))?;
    let mut command = Command::new(find::redis_server()?);
    command.arg(&config).arg("--sentinel");
    Managed::spawn(name, command, &dir.join("sentinel.log"))
}

/// The sentinel sees the master up, its replica and the other two
/// sentinels.
async fn sentinel_sees_all(url: &str) -> bool {
    let Ok(master) = command::<HashMap<String, String>>(
        url,
        redis::cmd("SENTINEL").arg("MASTER").arg(MASTER_NAME),
    )
    .await
    else {
        return false;
    };
    let field = |key: &str| master.get(key).map(String::as_str);
    field("flags") == Some("master")
        && field("num-slaves") == Some("1")
        && field("num-other-sentinels") == Some("2")
}

/// One command on a fresh connection: these are rare control calls, and a
/// fresh connection never lands on a server that has since been replaced.
pub async fn command<T: redis::FromRedisValue>(
    url: &str,
    cmd: &mut redis::Cmd,
) -> anyhow::Result<T> {
    let client = redis::Client::open(url)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .with_context(|| format!("connecting to {url}"))?;
    cmd.query_async(&mut conn)
        .await
        .with_context(|| format!("a command to {url}"))
}
