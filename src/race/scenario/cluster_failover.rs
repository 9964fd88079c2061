//! `cluster-failover`: a master of a Redis Cluster (`cluster-1`, three
//! masters with a replica each) fails over to its replica between two
//! waves of buyers; raced: every safe strategy whose stock lives in Redis
//! (from the catalogue), each on a product whose home that master serves
//! (`segmented`'s segments spread over all three, a third of them there).
//!
//! The script, per variant, on a fresh lab:
//! 1. every product is reset and the replica has caught up (the resets
//!    are on both);
//! 2. `sigkill` only: the replica is frozen (SIGSTOP) until the master
//!    drops it (`repl-timeout` set to 2 s): from then on the master alone
//!    has what it acknowledges;
//! 3. a first wave of buyers buys; the order writers move every order to
//!    PostgreSQL (checked: nothing pending in the ledger);
//! 4. the failover: `cluster-failover` sends `CLUSTER FAILOVER` to the
//!    replica; `sigkill` kills the master and resumes the replica, which
//!    the other masters elect once they agree the master failed
//!    (`cluster-node-timeout`, 2 s in the lab);
//! 5. once the replica serves the slots and every instance sells there
//!    again (a probe product at home on that master, bought through each
//!    instance until one buy succeeds), a second wave buys the rest.
//!
//! Expected, from the mechanism:
//! - `CLUSTER FAILOVER` is the coordinated kind: the master stops taking
//!   writes, the replica catches up with its offset, then takes over. No
//!   acknowledged write is lost: no sale lost, no unit sold twice, the
//!   stock sells exactly once. Buys sent during the switch are refused
//!   (`MOVED`, `READONLY`: unavailable) or sold, never both.
//! - SIGKILL with the replica behind: replication is asynchronous, so
//!   what the master acknowledged after the replica fell behind is gone —
//!   the decrements of the first wave. Their orders are safe in
//!   PostgreSQL, so no sale is lost, but the promoted replica sells those
//!   units again: every first-wave sale made on the failed master is sold
//!   twice (all of them for a product at home there; for `segmented`,
//!   those of its segments there, counted from the counters before the
//!   kill). Locks change nothing here: no holder is inside a section when
//!   the master dies; the third variant, `sigkill, lock held`, stages
//!   that ([`super::cluster_holders`]).

use std::collections::BTreeMap;
use std::time::Instant;

use nix::sys::signal::Signal;

use super::{Ctx, ScenarioRow, fault, until};
use crate::lab::sentinel;
use crate::lab::{Lab, LabArgs};
use crate::product::Settings;
use crate::race::client::Target;
use crate::race::driver::{Attempt, fire, reset};

/// The scenario's name.
pub(super) const NAME: &str = "cluster-failover";
/// Units on sale per product.
const STOCK: i64 = 20;
/// Buyers of the first wave (each buys one unit).
const BEFORE: usize = 8;
/// Buyers of the second wave: the whole stock again, and some refused.
const AFTER: usize = 60;
/// The master that fails, as the lab names it.
pub(super) const VICTIM: &str = "cluster-1";

/// How the master goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum How {
    /// `CLUSTER FAILOVER` on its replica.
    Coordinated,
    /// SIGKILL, with the replica behind.
    Killed,
}

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let strategies = ctx.safe_in_redis();
    let mut rows = Vec::new();
    for (variant, how) in [
        ("cluster-failover", How::Coordinated),
        ("sigkill", How::Killed),
    ] {
        let found = ctx
            .with_lab(topology(), async |ctx, lab| {
                failover(ctx, lab, &strategies, variant, how).await
            })
            .await?;
        rows.extend(found);
    }
    let held = ctx
        .with_lab(topology(), async |ctx, lab| {
            super::cluster_holders::run(ctx, lab).await
        })
        .await?;
    rows.extend(held);
    Ok(rows)
}

/// Three masters with a replica each, two instances: a fresh lab per
/// variant.
fn topology() -> LabArgs {
    LabArgs {
        redis_cluster: Some(3),
        cluster_replicas: true,
        ..LabArgs::with_instances(2)
    }
}

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
    on_victim: BTreeMap<String, i64>,
}

async fn failover(
    ctx: &mut Ctx,
    lab: &mut Lab,
    strategies: &[&'static str],
    variant: &str,
    how: How,
) -> anyhow::Result<Vec<ScenarioRow>> {
    let gateway = Target::new(&lab.info.gateway_url, &lab.info.admin_token, 8)?;
    let v = Victim::of(lab).await?;

    let mut races = Vec::new();
    for strategy in strategies {
        races.push(homed_on(ctx, &gateway, strategy, &v.victim).await?);
    }
    let probe = homed_on(ctx, &gateway, "redis-lua", &v.victim)
        .await?
        .product;
    caught_up(&v.victim_url, &v.replica_url).await?;
    if how == How::Killed {
        hold_back(lab, &v.victim_url, &v.replica_name).await?;
    }

    let started = Instant::now();
    let mut waves: Vec<Vec<Attempt>> = Vec::new();
    for race in &races {
        waves.push(fire(&gateway, race.product, "before", BEFORE, 4, None).await);
    }
    until("every first-wave order is in PostgreSQL", || async {
        let mut drained = true;
        for race in &races {
            drained &= gateway
                .ledger(race.product)
                .await
                .is_ok_and(|l| l.pending == 0);
        }
        drained
    })
    .await?;
    let mut sold_on_victim = Vec::new();
    for race in &races {
        let now = counters(&v.victim_url, race.on_victim.keys()).await?;
        sold_on_victim.push(
            race.on_victim
                .iter()
                .map(|(key, before)| before - now.get(key).copied().unwrap_or(0))
                .sum::<i64>(),
        );
    }

    match how {
        How::Coordinated => {
            let _: () =
                sentinel::command(&v.replica_url, redis::cmd("CLUSTER").arg("FAILOVER")).await?;
        }
        How::Killed => kill(lab, &v.replica_name).await?,
    }
    promoted(&v.replica_url).await?;
    let promoted = started.elapsed();
    sells_again(lab, probe).await?;
    eprintln!(
        "  {variant}: {} is master {:.1} s after the first wave began; the instances sell there {:.1} s later",
        v.replica,
        promoted.as_secs_f64(),
        (started.elapsed() - promoted).as_secs_f64()
    );

    let mut rows = Vec::new();
    for ((race, mut attempts), on_victim) in races.iter().zip(waves).zip(sold_on_victim) {
        attempts.extend(fire(&gateway, race.product, "after", AFTER, 4, None).await);
        let row = ctx
            .scripted_row(&gateway, race.product, &attempts, started)
            .await?;
        let lost = row.violations.get("ok_without_order").copied().unwrap_or(0);
        let twice = row.oversold;
        let (expected, met) = match how {
            How::Coordinated => (
                "no sale lost, no unit sold twice, the stock sold once".to_owned(),
                lost == 0 && twice == 0 && row.sold == STOCK,
            ),
            How::Killed => (
                format!(
                    "no sale lost; the {on_victim} first-wave sales on the failed master sold twice"
                ),
                lost == 0 && twice == on_victim && on_victim > 0,
            ),
        };
        rows.push(ScenarioRow {
            met: met && crate::check::truthful(&row.violations),
            expected,
            scenario: NAME.to_owned(),
            variant: variant.to_owned(),
            row,
            masters: Vec::new(),
        });
    }
    Ok(rows)
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
        let direct = Target::new(&instance.url, &lab.info.admin_token, 1)?;
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
    gateway: &Target,
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
async fn counters(
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
