//! `redis-failover`: the articles' own reason for RedLock. The main Redis
//! is a master with one replica under three Sentinels; a holder takes its
//! lock on the master, the master dies before the replica has the lock,
//! Sentinel promotes the replica, and a second buyer takes "the same" lock.
//! The instances find the master through the sentinels and follow the
//! promotion (`seckill lab --redis-sentinel`).
//!
//! The script (one unit per strategy, so two sales are an oversell; all
//! strategies share one failover):
//! 1. every product is reset and the replica has caught up with the
//!    master (the resets are on both);
//! 2. the replica is frozen (SIGSTOP) until the master drops it
//!    (`repl-timeout`, 2 s in the lab): from then on every write is on the
//!    master only;
//! 3. each holder buys through instance A: a locked strategy takes its
//!    lock (checked: the lock key is on the master) and sleeps `work_ms`
//!    inside its section; `redis-lua` sells at once, and its order is
//!    moved to PostgreSQL by the order writers (checked: the master's
//!    order stream is empty);
//! 4. the master is killed (SIGKILL), the replica resumed, and the
//!    sentinels promote it (checked: every sentinel names it, and no lock
//!    key made it there); instance B reaches it (its `/readyz` answers);
//! 5. a second buyer per product buys through B while the holders are
//!    still in their sections; then the holders finish.
//!
//! Where the stock lives is the scenario's choice for the locked
//! strategies: a PostgreSQL row (`store: postgres`, the articles' "Redis
//! lock guarding an inventory column"), so the failover hits their lock
//! and nothing else. With the stock on the same Redis the holder's late
//! write would go down with the connection its buy took from the old
//! master (a buy keeps one connection; see `backends::master`), and the
//! lock's loss would not show; see docs/scenarios.md for that measurement.
//!
//! Expected, from where each keeps what the failover loses:
//! - `redis-lock`: its lock is one key on the master; the failover loses
//!   it, the second buyer takes the lock on the promoted replica and reads
//!   the row the holder has not written yet; both sell: oversells.
//! - `redlock`: its lock is on three independent masters, the main one and
//!   two that do not fail over (the lab keeps RedLock's first master at
//!   the first master's fixed address, see `lab::sentinel`); the failover
//!   costs it one of three, the holder still holds the other two, and the
//!   second buyer cannot get a majority: busy, no oversell.
//! - `fenced`: lock *and* fencing counter are on the master. The holder's
//!   `INCR` is lost with the lock, so the promoted replica hands the second
//!   buyer the same token again; the row's fence accepts a token equal to
//!   the newest it has seen, so both writes pass: oversells. A fencing
//!   token is only as safe as the counter that issues it — Kleppmann's
//!   tokens come from a consensus system, not an asynchronously replicated
//!   Redis.
//! - `redis-lua`: no lock, the stock itself is the lost write. The holder's
//!   decrement and its order were acknowledged by the master alone; the
//!   order reached PostgreSQL, the decrement did not survive, so the
//!   promoted replica sells the same unit again: oversells. (Had the writer
//!   not moved the order yet, the order would have been lost instead:
//!   `ok_without_order`.)

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use super::{Ctx, Pending, STEP, ScenarioRow, buy_in_background, fault, judge, reset, until};
use crate::backends::Footprint;
use crate::lab::client::Gateway;
use crate::lab::sentinel;
use crate::lab::sentinel::SentinelInfo;
use crate::lab::{Lab, LabArgs};
use crate::model::info::{Expect, Hazard, Scenario};
use crate::model::product::{Product, Settings, StoreKind, keys};
use crate::race::driver::Attempt;
use crate::stock::strategy::Catalogue;

/// The holders' time inside their sections: enough for the master to die,
/// the sentinels to promote the replica (about 2 s after the kill in the
/// lab) and instance B to reach it, with room to spare.
const WORK_MS: u64 = 8_000;
/// Longer than the whole script, so no lease runs out: what a second
/// holder gets, it gets from the failover.
const LEASE_MS: u64 = 30_000;
/// How long a second buyer waits for a lock it cannot have.
const SECOND_WAITS_MS: u64 = 1_000;
/// The least that must be left of the holders' sections when the second
/// buyers are sent, for them to read the stock before a holder writes it.
const MARGIN: Duration = Duration::from_millis(2_000);

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        redis_sentinel: true,
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let token = &lab.info.admin_token;
        let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
        let b = Gateway::new(&lab.info.instances[1].url, token, 8)?;
        let topology = lab
            .info
            .sentinel
            .clone()
            .ok_or_else(|| anyhow::anyhow!("the lab has no sentinels"))?;

        let mut races = Vec::new();
        for (strategy, expect) in ctx.under(Hazard::Failover) {
            let product = ctx.product();
            let locks = locks_on_redis(&ctx.catalogue, strategy, product);
            reset(&a, product, strategy, 1, holding(locks, WORK_MS)).await?;
            races.push((product, expect, locks));
        }

        let master = hold_replication_back(lab, &topology).await?;
        let holders = Holders::send(&a, &races, WORK_MS);
        let master_url = topology.master_url.as_str();
        holders
            .inside(async |product, locks| {
                if locks {
                    return exists(master_url, &keys::lock(product))
                        .await
                        .unwrap_or(false);
                }
                let mut xlen = redis::cmd("XLEN");
                xlen.arg(keys::orders(product));
                let pending = sentinel::command::<u64>(master_url, &mut xlen).await;
                pending.is_ok_and(|pending| pending == 0)
            })
            .await?;
        let started = holders.started;

        fault(lab, "redis-master", Signal::SIGKILL)?;
        fault(lab, "redis-replica", Signal::SIGCONT)?;
        let sentinels: Vec<String> = topology
            .sentinels
            .iter()
            .map(|s| format!("redis://{s}"))
            .collect();
        let promoted = sentinel::wait_failover(&sentinels, master, STEP).await?;
        eprintln!(
            "  {promoted} promoted {:.1} s into the holders' sections",
            started.elapsed().as_secs_f64()
        );
        for (product, ..) in &races {
            anyhow::ensure!(
                !exists(&format!("redis://{promoted}"), &keys::lock(*product)).await?,
                "product {product}'s lock reached the replica: no write was lost"
            );
        }
        until("instance B reaches the new master", || async {
            b.http
                .get(format!("{}/readyz", b.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        })
        .await?;

        holders
            .second_buyers(ctx, &b, Scenario::RedisFailover, "")
            .await
    })
    .await
}

/// Holders still inside their sections after a failover, one per product
/// (with what is expected of its strategy).
pub(super) struct Holders {
    /// Product, expectation and whether its strategy locks on Redis, per
    /// holder.
    races: Vec<(i64, Expect, bool)>,
    /// The holders' buys.
    pending: Vec<Pending>,
    /// When the holders were sent.
    pub started: Instant,
    /// How long each works inside its section.
    work: Duration,
}

impl Holders {
    /// Sends a holder per race (product, expectation, whether it locks on
    /// Redis) through `a`, each to work `work_ms` inside its section.
    pub(super) fn send(a: &Gateway, races: &[(i64, Expect, bool)], work_ms: u64) -> Self {
        Self {
            started: Instant::now(),
            pending: races
                .iter()
                .map(|(product, ..)| buy_in_background(a, *product, "holder"))
                .collect(),
            races: races.to_vec(),
            work: Duration::from_millis(work_ms),
        }
    }

    /// Waits until every holder is inside its section: a locking one seen
    /// holding its lock, a lockless one done with its sale — each as
    /// `seen(product, locks)` tells. Each holder is seen once and
    /// remembered: its lock stays until its section ends, `work` after it
    /// was taken, and every lock was taken after the holders were sent, so
    /// while less than `work` has passed since then every holder seen is
    /// still inside. That is the event waited for; a moment where one
    /// round of checks finds them all holding at once is not (on a loaded
    /// machine the checks answer slowly, and the first sections could end
    /// before a round caught the last holder).
    pub(super) async fn inside(
        &self,
        mut seen: impl AsyncFnMut(i64, bool) -> bool,
    ) -> anyhow::Result<()> {
        let mut inside = vec![false; self.races.len()];
        while inside.iter().any(|i| !i) {
            for (i, ((product, _, locks), holder)) in
                self.races.iter().zip(&self.pending).enumerate()
            {
                let answered = holder.is_finished();
                if inside[i] || (!*locks && !answered) {
                    continue;
                }
                inside[i] = seen(*product, *locks).await;
                anyhow::ensure!(
                    inside[i] || !(*locks && answered),
                    "product {product}'s holder answered before it was seen holding its lock"
                );
            }
            anyhow::ensure!(
                self.started.elapsed() < self.work,
                "not every holder was inside its section {:?} after they were sent: raise their work",
                self.work
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Sends a second buyer per product through `b` while the holders
    /// still work (at least [`MARGIN`] of their work must be left), waits
    /// for the holders, and judges each product's two buys.
    pub(super) async fn second_buyers(
        self,
        ctx: &Ctx,
        b: &Gateway,
        scenario: Scenario,
        variant: &str,
    ) -> anyhow::Result<Vec<ScenarioRow>> {
        let left = self.work.saturating_sub(self.started.elapsed());
        anyhow::ensure!(
            left >= MARGIN,
            "only {left:?} of the holders' work left after the failover: raise their work"
        );
        let deadline = self.started + self.work - MARGIN / 2;
        let seconds = futures::future::join_all(
            self.races
                .iter()
                .map(|(product, ..)| second_buyer(b, *product, deadline)),
        )
        .await;
        let mut rows = Vec::new();
        for (((product, expect, _), holder), mut attempts) in
            self.races.into_iter().zip(self.pending).zip(seconds)
        {
            attempts.insert(0, holder.await?);
            let row = ctx
                .scripted_row(b, product, &attempts, self.started)
                .await?;
            rows.push(judge(row, scenario, variant, expect));
        }
        Ok(rows)
    }
}

/// A second buyer as a client: a 503 `unavailable` (nothing was sent to
/// the store: the instance had no connection to the new master yet) is
/// tried again until one gets through or `deadline`, every answer kept for
/// the history. On a loaded machine a reconnect in the middle of a
/// failover can take longer than the lane's 2 s (seen in CI: the cluster
/// connection's slot refresh while the nodes still agreed on the new
/// master); what the scenario races is the buyer who gets through.
async fn second_buyer(b: &Gateway, product: i64, deadline: Instant) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    loop {
        let attempt = Attempt::make(b, product, "second-buyer").await;
        let again =
            attempt.answer.code.as_deref() == Some("unavailable") && Instant::now() < deadline;
        attempts.push(attempt);
        if !again {
            return attempts;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A holder's settings: `work_ms` inside its section under a lease that
/// outlives the script (what a second holder gets, it gets from the
/// failover), a second buyer waiting [`SECOND_WAITS_MS`]; a strategy that
/// `locks` on Redis guards a PostgreSQL row.
pub(super) fn holding(locks: bool, work_ms: u64) -> Settings {
    Settings {
        work_ms,
        lease_ms: LEASE_MS,
        acquire_timeout_ms: SECOND_WAITS_MS,
        store: locks.then_some(StoreKind::Postgres),
        ..Settings::default()
    }
}

/// Whether `strategy` locks with keys on Redis (the product's lock key on
/// the main Redis, or on the RedLock masters): such a strategy takes a
/// `store` setting, and here guards a PostgreSQL row, so that the
/// failover takes its lock and nothing else.
pub(super) fn locks_on_redis(catalogue: &Catalogue, strategy: &str, product: i64) -> bool {
    let probe = Product {
        id: product,
        strategy: strategy.to_owned(),
        settings: Settings::default(),
        initial: 1,
        epoch: 0,
    };
    catalogue.get(strategy).is_some_and(|s| {
        let Footprint { redis, redlock, .. } = s.footprint(&probe);
        redis.contains(&keys::lock(product)) || !redlock.is_empty()
    })
}

/// Waits until the replica has every write so far, then freezes it until
/// the master drops it: from then on the master alone has what it is
/// told. Returns the master's address, as the sentinels name it.
async fn hold_replication_back(
    lab: &Lab,
    topology: &SentinelInfo,
) -> anyhow::Result<std::net::SocketAddr> {
    let sentinel_url = format!("redis://{}", topology.sentinels[0]);
    let master = sentinel::master_addr(&sentinel_url).await?;
    let written = sentinel::replication(&topology.master_url).await?.offset;
    until("the replica has the resets", || async {
        sentinel::replication(&topology.replica_url)
            .await
            .is_ok_and(|r| r.offset >= written)
    })
    .await?;
    fault(lab, "redis-replica", Signal::SIGSTOP)?;
    until("the master drops the frozen replica", || async {
        sentinel::replication(&topology.master_url)
            .await
            .is_ok_and(|r| r.connected_replicas == 0)
    })
    .await?;
    Ok(master)
}

/// Whether `key` exists on the Redis at `url`.
async fn exists(url: &str, key: &str) -> anyhow::Result<bool> {
    sentinel::command(url, redis::cmd("EXISTS").arg(key)).await
}
