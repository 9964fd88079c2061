//! `cluster-failover`, variant `sigkill, lock held`: the `redis-failover`
//! script on a Redis Cluster. A holder per strategy takes its lock on the
//! failing master (`cluster-1`, its replica frozen so that the master
//! alone has the lock) and works inside its section; the master is killed
//! and its replica promoted by the other masters; a second buyer per
//! product buys through the other instance while the holders still work.
//!
//! Raced: the strategies the catalogue declares under a failover, each on
//! one unit at home on the failing master. A locked strategy guards a
//! PostgreSQL row here (`store: postgres`), so the failover takes its lock
//! and nothing else (as in `redis-failover`).
//!
//! Expected, as on Sentinel (the catalogue's `failover` outcomes), since a
//! cluster replicates as asynchronously: `redis-lock` and `fenced` lose
//! the lock key (and `fenced` its fencing counter) with the master, so the
//! second buyer takes "the same" lock and both sell: oversells. `redlock`
//! keeps its lock on its independent masters, none of which is in the
//! cluster: the second buyer is busy, no oversell. `redis-lua` holds no
//! lock, but its decrement was the master's alone: the unit sells again.

use super::cluster_victim::{Victim, caught_up, hold_back, homed_on, kill, promoted, sells_again};
use super::redis_failover::{Holders, holding, locks_on_redis};
use super::{Ctx, ScenarioRow};
use crate::lab::client::Gateway;
use crate::lab::{Lab, sentinel};
use crate::model::info::{Hazard, Scenario};
use crate::model::product::keys;
use crate::race::driver::reset;

/// The holders' time inside their sections: enough for the master to die,
/// the replica to be promoted (about 4 s after the kill in the lab) and
/// instance B to sell there, with room to spare.
const WORK_MS: u64 = 10_000;
/// The variant's name.
const VARIANT: &str = "sigkill, lock held";

pub(super) async fn run(ctx: &mut Ctx, lab: &mut Lab) -> anyhow::Result<Vec<ScenarioRow>> {
    let token = &lab.info.admin_token;
    let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
    let b = Gateway::new(&lab.info.instances[1].url, token, 8)?;
    let v = Victim::of(lab).await?;

    let mut races = Vec::new();
    for (strategy, expect) in ctx.under(Hazard::Failover) {
        let product = homed_on(ctx, &a, strategy, &v.victim).await?.product;
        let locks = locks_on_redis(&ctx.catalogue, strategy, product);
        reset(&a, product, strategy, 1, holding(locks, WORK_MS)).await?;
        races.push((product, expect, locks));
    }
    let probe = homed_on(ctx, &a, "redis-lua", &v.victim).await?.product;
    caught_up(&v.victim_url, &v.replica_url).await?;
    hold_back(lab, &v.victim_url, &v.replica_name).await?;

    let holders = Holders::send(&a, &races, WORK_MS);
    let redlock = lab.info.redlock_urls.first().cloned().unwrap_or_default();
    holders
        .inside(async |product, locks| {
            let lock = keys::lock(product);
            match locks {
                true => exists(&v.victim_url, &lock).await || exists(&redlock, &lock).await,
                false => a.ledger(product).await.is_ok_and(|l| l.pending == 0),
            }
        })
        .await?;
    let started = holders.started;

    kill(lab, &v.replica_name).await?;
    promoted(&v.replica_url).await?;
    sells_again(lab, probe).await?;
    eprintln!(
        "  {VARIANT}: {} sells {:.1} s into the holders' sections",
        v.replica,
        started.elapsed().as_secs_f64()
    );
    for (product, ..) in &races {
        anyhow::ensure!(
            !exists(&v.replica_url, &keys::lock(*product)).await,
            "product {product}'s lock reached the replica: no write was lost"
        );
    }
    holders
        .second_buyers(ctx, &b, Scenario::ClusterFailover, VARIANT)
        .await
}

/// Whether `key` exists on the Redis at `url` (false when it cannot say).
async fn exists(url: &str, key: &str) -> bool {
    sentinel::command::<bool>(url, redis::cmd("EXISTS").arg(key))
        .await
        .unwrap_or(false)
}
