//! The Redis Cluster nemesis the `cluster-failover` variants share: the
//! master that fails (`cluster-1`) and the replica that follows it,
//! products homed on it, and each step of a failover — the replica caught
//! up, held back, the master killed, the replica promoted, every instance
//! selling there again.

use std::collections::BTreeMap;

use nix::sys::signal::Signal;

use super::{Ctx, fault, until};
use crate::lab::Lab;
use crate::lab::client::Gateway;
use crate::lab::sentinel;
use crate::model::product::Settings;
use crate::race::driver::reset;

/// Units on sale per product.
pub(super) const STOCK: i64 = 20;
/// The master that fails, as the lab names it.
pub(super) const VICTIM: &str = "cluster-1";

/// The master that fails and the replica that follows it.
pub(super) struct Victim {
    /// The master's `host:port`.
    pub victim: String,
    /// Its URL.
    pub victim_url: String,
    /// The replica's `host:port`.
    pub replica: String,
    /// The replica's name in the lab.
    pub replica_name: String,
    /// Its URL.
    pub replica_url: String,
}

impl Victim {
    /// `cluster-1` of the lab's cluster, and its replica (found by `ROLE`:
    /// `redis-cli --cluster create` pairs them as it likes).
    pub(super) async fn of(lab: &Lab) -> anyhow::Result<Self> {
        let cluster = lab
            .info
            .cluster
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the lab has no cluster"))?;
        let victim = cluster.masters[0].clone();
        let (replica, replica_name) = replica_of(&cluster.replicas, &victim).await?;
        Ok(Self {
            victim_url: format!("redis://{victim}"),
            replica_url: format!("redis://{replica}"),
            victim,
            replica,
            replica_name,
        })
    }
}

/// One product per strategy, homed on the victim.
pub(super) struct Race {
    /// The product.
    pub product: i64,
    /// The product's counters on the victim and their values now.
    pub on_victim: BTreeMap<String, i64>,
}

/// Waits until the replica at `replica_url` has every write the master
/// at `victim_url` has.
pub(super) async fn caught_up(victim_url: &str, replica_url: &str) -> anyhow::Result<()> {
    let written = sentinel::replication(victim_url).await?.offset;
    until("the replica has every write so far", || async {
        sentinel::replication(replica_url)
            .await
            .is_ok_and(|r| r.offset >= written)
    })
    .await
}

/// Freezes the replica until the master drops it (`repl-timeout` set to
/// 2 s): from then on the master alone has what it acknowledges.
pub(super) async fn hold_back(lab: &Lab, victim_url: &str, replica: &str) -> anyhow::Result<()> {
    let _: () = sentinel::command(
        victim_url,
        redis::cmd("CONFIG").arg("SET").arg("repl-timeout").arg(2),
    )
    .await?;
    fault(lab, replica, Signal::SIGSTOP)?;
    until("the master drops the frozen replica", || async {
        sentinel::replication(victim_url)
            .await
            .is_ok_and(|r| r.connected_replicas == 0)
    })
    .await
}

/// Kills the victim and resumes its frozen replica.
pub(super) async fn kill(lab: &Lab, replica: &str) -> anyhow::Result<()> {
    fault(lab, VICTIM, Signal::SIGKILL)?;
    fault(lab, replica, Signal::SIGCONT)
}

/// Waits until the replica at `replica_url` is a master.
pub(super) async fn promoted(replica_url: &str) -> anyhow::Result<()> {
    until("the replica serves the master's slots", || async {
        sentinel::replication(replica_url)
            .await
            .is_ok_and(|r| r.role == "master")
    })
    .await
}

/// Waits until every instance sells `probe` (a product at home on the
/// promoted master) again.
pub(super) async fn sells_again(lab: &Lab, probe: i64) -> anyhow::Result<()> {
    for instance in &lab.info.instances {
        let direct = Gateway::new(&instance.url, &lab.info.admin_token, 1)?;
        until("every instance sells on the promoted master", || async {
            direct.answer(probe, "probe").await.status == 200
        })
        .await?;
    }
    Ok(())
}

/// Resets products for `strategy` until one's home is on `victim` (a
/// `segmented` product as it comes: its segments are everywhere), and
/// notes its counters there.
pub(super) async fn homed_on(
    ctx: &mut Ctx,
    gateway: &Gateway,
    strategy: &'static str,
    victim: &str,
) -> anyhow::Result<Race> {
    for _ in 0..100 {
        let product = ctx.product();
        reset(gateway, product, strategy, STOCK, Settings::default()).await?;
        let placement = gateway.ledger(product).await?.placement.unwrap_or_default();
        let keys: Vec<String> = placement
            .iter()
            .filter(|p| p.master.as_deref() == Some(victim))
            .map(|p| p.key.clone())
            .collect();
        let home_there = placement
            .first()
            .is_some_and(|p| p.master.as_deref() == Some(victim));
        if home_there || placement.len() > 1 {
            let on_victim = counters(&format!("redis://{victim}"), keys.iter()).await?;
            return Ok(Race { product, on_victim });
        }
    }
    anyhow::bail!("no product of 100 has its home on {victim}: is GET /stock/{{id}} placing it?")
}

/// The values of `keys` on the node at `url`.
pub(super) async fn counters(
    url: &str,
    keys: impl Iterator<Item = &String>,
) -> anyhow::Result<BTreeMap<String, i64>> {
    let mut values = BTreeMap::new();
    for key in keys {
        let value: Option<i64> = sentinel::command(url, redis::cmd("GET").arg(key)).await?;
        values.insert(key.clone(), value.unwrap_or(0));
    }
    Ok(values)
}

/// The replica (`host:port`, lab name) following `master`, by `ROLE`.
async fn replica_of(replicas: &[String], master: &str) -> anyhow::Result<(String, String)> {
    let port = master.rsplit(':').next().unwrap_or_default();
    for (i, replica) in replicas.iter().enumerate() {
        let role: Vec<redis::Value> =
            sentinel::command(&format!("redis://{replica}"), &mut redis::cmd("ROLE")).await?;
        if let Some(redis::Value::Int(p)) = role.get(2)
            && p.to_string() == port
        {
            return Ok((replica.clone(), format!("cluster-replica-{}", i + 1)));
        }
    }
    anyhow::bail!("no replica follows {master}")
}
