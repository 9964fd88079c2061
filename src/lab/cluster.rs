//! A real Redis Cluster on loopback: N masters, optionally one replica
//! each, started as plain `redis-server --cluster-enabled yes` and joined
//! by `redis-cli --cluster create`, the way an operator builds one. The
//! first piece of running the stock beyond one Redis (issue 12): what a
//! cluster-aware instance, the sharded order stream and the spread
//! segments will stand on.
//!
//! Timings are shortened as in the Sentinel topology: a master silent for
//! [`NODE_TIMEOUT`] is failed over in seconds, not the default 15 s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use super::durability::Durability;
use super::find;
use super::redis::{self as server, Node};

/// How long a node may stay silent before its peers call it failed
/// (`cluster-node-timeout`).
pub const NODE_TIMEOUT: Duration = Duration::from_millis(2000);

/// Every hash slot of a cluster.
pub const SLOTS: u32 = 16384;

/// How long the cluster may take to agree on its shape once created.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// A running cluster. The fields are public so that a lab or a scenario
/// can take the processes over (to freeze or kill a master by name).
pub struct Cluster {
    /// The masters, each serving a third (or an Nth) of the slots
    /// (`cluster-1` …).
    pub masters: Vec<Node>,
    /// One replica per master, if asked for (`cluster-replica-1` …), each
    /// following the master of the same index.
    pub replicas: Vec<Node>,
}

/// Where the lab's cluster is (`seckill lab --redis-cluster`;
/// [`super::LabInfo::cluster`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterInfo {
    /// The masters' `host:port`, in the order they were created
    /// (`cluster-1` …): what the instances are given.
    pub masters: Vec<String>,
    /// The replicas' `host:port`, the replica of `masters[i]` at `i`
    /// (`cluster-replica-1` …), if any.
    pub replicas: Vec<String>,
}

impl super::Lab {
    /// Starts a [`Cluster`] for the instances and takes its processes
    /// over by their names, so a scenario can freeze, resume or kill each.
    pub(super) async fn start_cluster(
        &mut self,
        masters: usize,
        replicas: bool,
    ) -> anyhow::Result<()> {
        let Cluster { masters, replicas } = Cluster::start(
            &self.info.dir.join("cluster"),
            masters,
            replicas,
            self.info.durability,
        )
        .await?;
        let addrs = |nodes: &[Node]| nodes.iter().map(|n| n.addr.to_string()).collect();
        self.info.cluster = Some(ClusterInfo {
            masters: addrs(&masters),
            replicas: addrs(&replicas),
        });
        self.info.redis_url = masters[0].url();
        for node in masters.into_iter().chain(replicas) {
            self.adopt(node.process);
        }
        Ok(())
    }
}

/// One line of `CLUSTER NODES`: what a node says about a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// `127.0.0.1:port`.
    pub addr: String,
    /// Its role now.
    pub master: bool,
    /// Hash slots it serves (0 for a replica).
    pub slots: u32,
}

impl Cluster {
    /// Starts `masters` masters (at least 3, as Redis Cluster requires),
    /// and one replica each if `replicas`, under `dir`, persisting as
    /// `mode` says; creates the cluster and waits until every node sees
    /// every slot served.
    pub async fn start(
        dir: &Path,
        masters: usize,
        replicas: bool,
        mode: Durability,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(
            masters >= 3,
            "a Redis Cluster needs at least 3 masters, got {masters}"
        );
        let extra: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([NODE_TIMEOUT.as_millis().to_string()])
        .collect();
        let mut cluster = Self {
            masters: Vec::new(),
            replicas: Vec::new(),
        };
        for i in 1..=masters {
            let name = format!("cluster-{i}");
            cluster
                .masters
                .push(server::node(dir, &name, mode, &extra).await?);
        }
        if replicas {
            for i in 1..=masters {
                let name = format!("cluster-replica-{i}");
                cluster
                    .replicas
                    .push(server::node(dir, &name, mode, &extra).await?);
            }
        }
        cluster.create().await?;
        cluster.wait_formed().await?;
        Ok(cluster)
    }

    /// `redis-cli --cluster create`: the slots split evenly over the
    /// masters (listed first) and, with `--cluster-replicas 1`, each
    /// replica assigned to a master.
    async fn create(&self) -> anyhow::Result<()> {
        let mut command = Command::new(find::redis_cli()?);
        command.arg("--cluster").arg("create");
        command.args(self.nodes().map(|n| n.addr.to_string()));
        if !self.replicas.is_empty() {
            command.args(["--cluster-replicas", "1"]);
        }
        let out = command
            .arg("--cluster-yes")
            .output()
            .await
            .context("running redis-cli --cluster create")?;
        anyhow::ensure!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    }

    /// Stops the replicas, then the masters (a replica stopped first
    /// cannot be promoted on the way out).
    pub async fn stop(self) {
        let grace = Duration::from_secs(5);
        for node in self.replicas.into_iter().chain(self.masters) {
            node.process.stop(grace).await;
        }
    }

    /// Every node, masters first.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.masters.iter().chain(&self.replicas)
    }

    /// The masters' `redis://` URLs, a cluster client's seeds.
    pub fn urls(&self) -> Vec<String> {
        self.masters.iter().map(Node::url).collect()
    }

    /// Waits until every node reports `cluster_state:ok` and knows all
    /// its peers, with every slot served by the expected number of
    /// masters.
    async fn wait_formed(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        let nodes = self.nodes().count();
        loop {
            let mut formed = true;
            for node in self.nodes() {
                let agrees = match peers(&node.url()).await {
                    Ok(peers) => {
                        peers.len() == nodes
                            && peers.iter().filter(|p| p.master).count() == self.masters.len()
                            && peers.iter().map(|p| p.slots).sum::<u32>() == SLOTS
                            && state_ok(&node.url()).await
                    }
                    Err(_) => false,
                };
                formed &= agrees;
            }
            if formed {
                return Ok(());
            }
            anyhow::ensure!(
                started.elapsed() < FORM_TIMEOUT,
                "the cluster did not form within {FORM_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The text a node at `url` answers `command` with (its own connection).
async fn ask(url: &str, command: &[&str]) -> anyhow::Result<String> {
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    Ok(redis::cmd(command[0])
        .arg(&command[1..])
        .query_async(&mut conn)
        .await?)
}

/// What the node at `url` knows of the cluster (`CLUSTER NODES`).
pub async fn peers(url: &str) -> anyhow::Result<Vec<Peer>> {
    let text = ask(url, &["CLUSTER", "NODES"]).await?;
    Ok(text.lines().filter_map(parse_peer).collect())
}

/// How many times the node at `addr` (`host:port`) has run each command
/// since it started, from `INFO commandstats` (commands a script calls
/// count too: a selling script's `XADD` is one sale).
pub async fn command_calls(addr: &str) -> anyhow::Result<BTreeMap<String, u64>> {
    let text = ask(&format!("redis://{addr}"), &["INFO", "commandstats"]).await?;
    Ok(text.lines().filter_map(parse_calls).collect())
}

/// `cmdstat_evalsha:calls=12,usec=…` as (`evalsha`, 12).
fn parse_calls(line: &str) -> Option<(String, u64)> {
    let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
    let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
    Some((name.to_owned(), calls.parse().ok()?))
}

/// `cluster_state:ok` in the node's `CLUSTER INFO`.
async fn state_ok(url: &str) -> bool {
    ask(url, &["CLUSTER", "INFO"])
        .await
        .is_ok_and(|info| info.lines().any(|l| l.trim() == "cluster_state:ok"))
}

/// One `CLUSTER NODES` line: `<id> <ip:port@cport> <flags> <master>
/// <ping> <pong> <epoch> <link> <slot>…`, slots as `a-b` ranges or
/// single numbers (`[…]` entries are slots being migrated, not served).
fn parse_peer(line: &str) -> Option<Peer> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let addr = fields.get(1)?.split('@').next()?.to_owned();
    let flags = fields.get(2)?;
    let slots = fields
        .iter()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b
                .parse::<u32>()
                .ok()
                .zip(a.parse::<u32>().ok())
                .map(|(b, a)| b - a + 1),
            None => range.parse::<u32>().ok().map(|_| 1),
        })
        .sum::<Option<u32>>()?;
    Some(Peer {
        addr,
        master: flags.split(',').any(|f| f == "master"),
        slots,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commandstats_line_gives_its_calls() {
        assert_eq!(
            parse_calls("cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0"),
            Some(("evalsha".to_owned(), 12))
        );
        assert_eq!(
            parse_calls("cmdstat_cluster|slots:calls=3,usec=1"),
            Some(("cluster|slots".to_owned(), 3))
        );
        assert_eq!(parse_calls("# Commandstats"), None);
    }

    #[test]
    fn a_nodes_line_gives_its_role_and_slot_count() {
        let master = "07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004 myself,master - 0 1426238317239 4 connected 0-5460 5462";
        assert_eq!(
            parse_peer(master),
            Some(Peer {
                addr: "127.0.0.1:30004".into(),
                master: true,
                slots: 5462,
            })
        );
        let replica = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 slave 67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 0 1426238316232 1 connected";
        assert_eq!(
            parse_peer(replica).map(|p| (p.master, p.slots)),
            Some((false, 0))
        );
        let migrating = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [5460->-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]";
        assert_eq!(parse_peer(migrating).map(|p| p.slots), Some(5462));
    }
}
