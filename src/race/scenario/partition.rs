//! `partition`: the instance holding the lock loses its lock's backend
//! for longer than the lock outlives it, the other instance takes the
//! lock, and the link comes back.
//!
//! The lab runs `--proxied`: every link between an instance and a backend
//! goes through a fault proxy, and only instance A's links to the lock's
//! backend (Redis, the three RedLock masters, ZooKeeper, etcd or PostgreSQL) are
//! blackholed. One unit on sale, so two sales are an oversell. The script:
//! A buys and is inside its section; 200 ms later its links to the lock's
//! backend go silent; B buys at once, waits for the lock and sells (or
//! finds the unit gone); once B has answered, and A has answered or had
//! time to (the response timeouts of its write and its release), the
//! links heal; the held bytes land, and the ledger is read.
//!
//! **Healing is `Pass`, not `Cut` then `Pass`.** The partition lasts a few
//! seconds, and Linux keeps retransmitting unacknowledged data for ~15
//! minutes (`tcp_retries2`): what the instance sent into the partition
//! reaches the backend when it heals, however long ago the client library
//! stopped waiting for the answer. That is the delayed packet of the
//! fencing argument. A reset (`Cut`) first would model a partition longer
//! than TCP's patience, or a firewall that rejects, and would silently
//! drop the write whose outcome the buyer was told is unknown.
//!
//! **Work the lock is safe with.** A partition is only a hazard of its own
//! if the lock would hold without it: a plain lease (`redis-lock`,
//! `redlock`, `db-lock-table`, whose catalogue entries say they oversell
//! under lease expiry) is raced with work well inside its lease; a lock
//! that survives long work (`redisson`'s watchdog, ZooKeeper's session,
//! `fenced`'s token) with work well past it.
//!
//! Two variants, one hazard each, so each strategy declares what it
//! expects of each:
//! - `lock-only` ([`Hazard::Partition`]): the stock lives on a backend A
//!   still reaches (PostgreSQL under a Redis lock, Redis under a ZooKeeper
//!   or lock-table lock). Expected, from the mechanism: a plain lease
//!   holds — A writes within its lease, and a release A cannot deliver
//!   only makes B wait for the lease to run out, then find the unit sold
//!   (`sells-all`). `redisson` oversells: the watchdog cannot renew, the
//!   lease expires under A, B sells, and A's write lands from its stale
//!   read. `zookeeper` oversells: A's session expires, the server deletes
//!   A's node, B takes the lock; nothing stops A's write to Redis. `etcd`
//!   oversells for the same reason: A's watchdog cannot renew its lease,
//!   etcd revokes it with A's key, B's queued request is answered.
//!   `fenced` does not: B's newer token reached the stock first, so A's
//!   write is refused and its buyer told `busy` (`sells-all`).
//! - `lock+store` ([`Hazard::PartitionWithStore`]): the stock lives on the
//!   cut-off backend too (the default stores). A's write goes into the
//!   partition: Redis does not answer within redis-rs's 500 ms, and A's
//!   buyer is told `outcome_unknown` (503); the instances' PostgreSQL
//!   calls have no timeout, so A's buyer waits out the partition. Either
//!   way the write
//!   lands at the heal, after B read the stock: every unfenced lock
//!   oversells, even the plain leases whose holder wrote "within" its
//!   lease; `fenced` refuses the late write. ZooKeeper cannot hold stock,
//!   so `zookeeper` does not declare this variant, nor does `etcd`.
//!
//! Every row is also held to the history check: a buyer told 200 has its
//! order, and a buyer told `outcome_unknown` is settled by the ledger.
//!
//! Measured (debug build, docs/scenarios.md): every row as derived here.

use std::time::{Duration, Instant};

use anyhow::Context;

use super::{Ctx, ScenarioRow, buy_in_background, judge, reset};
use crate::lab::Lab;
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::lab::links::Backend;
use crate::lab::proxy::Mode;
use crate::model::info::{Expect, Hazard, Info, Scenario};
use crate::model::product::{Settings, StoreKind};

/// The variant where only the lock's backend is cut off.
pub const LOCK_ONLY: &str = "lock-only";
/// The variant where the stock lives on the cut-off backend too.
pub const LOCK_AND_STORE: &str = "lock+store";

/// Each variant and the hazard whose expectations it reads.
const VARIANTS: [(Hazard, &str); 2] = [
    (Hazard::Partition, LOCK_ONLY),
    (Hazard::PartitionWithStore, LOCK_AND_STORE),
];

/// Every lease: the Redis locks', RedLock's validity, the lock row's.
const LEASE_MS: u64 = 1000;
/// The ZooKeeper session the instances ask for (set here, so the timing
/// does not rest on `serve`'s default).
const ZK_SESSION_MS: u64 = 2000;
/// The lab's ZooKeeper tick: a session expires on the first tick after its
/// timeout, and B hears of the deleted node a moment later.
const ZK_TICK_MS: u64 = 200;
/// How often etcd looks for expired leases: a lease is revoked on the
/// first look after its TTL (whole seconds) ran out.
const ETCD_EXPIRY_CHECK_MS: u64 = 500;
/// When A is surely inside its section (it acquired the lock and read the
/// stock) and its links are cut.
const CUT_AT_MS: u64 = 200;
/// Work for a plain lease: A writes after the cut and half a lease before
/// its lock runs out.
const SHORT_WORK_MS: u64 = 500;
/// Work for a lock that outlives its lease: A writes this long after its
/// lock is surely gone, time for B to take it and read the stock.
const MARGIN_MS: u64 = 1000;
/// How long A may take to answer after its write: the response timeouts
/// of the write and of the release (500 ms each in redis-rs), and some.
const ANSWER_GRACE: Duration = Duration::from_millis(1500);
/// After the heal, for the bytes the partition held to land.
const LANDING: Duration = Duration::from_millis(500);

/// Where a strategy's lock lives, as the lab can cut it off.
struct Home {
    /// A's links to blackhole.
    links: &'static [Backend],
    /// The store on those backends (`None`: they cannot hold stock).
    store_there: Option<StoreKind>,
    /// A store on a backend A still reaches.
    store_elsewhere: StoreKind,
    /// How long A's lock outlives the cut, at most.
    lifetime_ms: u64,
}

/// The home of `info`'s lock, from the backend its catalogue entry names.
fn home(info: &Info) -> anyhow::Result<Home> {
    let redis = |links| Home {
        links,
        store_there: Some(StoreKind::Redis),
        store_elsewhere: StoreKind::Postgres,
        lifetime_ms: LEASE_MS,
    };
    Ok(match info.backend {
        "redis" => redis(&[Backend::Redis]),
        "redis x N" => redis(&Backend::REDLOCK),
        "postgres" => Home {
            links: &[Backend::Postgres],
            store_there: Some(StoreKind::Postgres),
            store_elsewhere: StoreKind::Redis,
            lifetime_ms: LEASE_MS,
        },
        "zookeeper" => Home {
            links: &[Backend::ZooKeeper],
            store_there: None,
            store_elsewhere: StoreKind::Redis,
            lifetime_ms: ZK_SESSION_MS + 2 * ZK_TICK_MS,
        },
        "etcd" => Home {
            links: &[Backend::Etcd],
            store_there: None,
            store_elsewhere: StoreKind::Redis,
            lifetime_ms: LEASE_MS.div_ceil(1000) * 1000 + ETCD_EXPIRY_CHECK_MS,
        },
        other => anyhow::bail!(
            "{} declares a partition hazard, but its lock is on {other}, which the lab cannot cut off",
            info.id
        ),
    })
}

/// Work the lock is safe with when nothing is cut: past its lease if its
/// catalogue entry says it survives that, well within it otherwise.
fn work_ms(info: &Info, home: &Home) -> u64 {
    let outlives_its_lease = matches!(
        info.expect(Hazard::LeaseExpiry),
        Some(Expect::NoOversell | Expect::SellsAll)
    );
    if outlives_its_lease {
        CUT_AT_MS + home.lifetime_ms + MARGIN_MS
    } else {
        SHORT_WORK_MS
    }
}

/// Races every strategy that declares a partition hazard, in its variant,
/// on one proxied lab: a row per declaration.
pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    let topology = LabArgs {
        proxied: true,
        instance_env: vec![(
            "SECKILL_ZOOKEEPER_SESSION_MS".to_owned(),
            ZK_SESSION_MS.to_string(),
        )],
        ..LabArgs::with_instances(2)
    };
    ctx.with_lab(topology, async |ctx, lab| {
        let token = &lab.info.admin_token;
        let a = Gateway::new(&lab.info.instances[0].url, token, 8)?;
        let b = Gateway::new(&lab.info.instances[1].url, token, 8)?;
        let mut rows = Vec::new();
        for (hazard, variant) in VARIANTS {
            let declared: Vec<(Info, Expect)> = ctx
                .catalogue
                .all()
                .filter_map(|s| Some((s.info().clone(), s.info().expect(hazard)?)))
                .collect();
            for (info, expect) in declared {
                let home = home(&info)?;
                let store = match hazard {
                    Hazard::PartitionWithStore => home.store_there.with_context(|| {
                        format!(
                            "{} declares {hazard:?}, but its lock's backend holds no stock",
                            info.id
                        )
                    })?,
                    _ => home.store_elsewhere,
                };
                let settings = Settings {
                    work_ms: work_ms(&info, &home),
                    lease_ms: LEASE_MS,
                    store: Some(store),
                    ..Settings::default()
                };
                let product = ctx.product();
                reset(&b, product, info.id, 1, settings).await?;
                let started = Instant::now();
                let mut holder = buy_in_background(&a, product, "cut-off-buyer");
                tokio::time::sleep(Duration::from_millis(CUT_AT_MS)).await;
                set_links(lab, &home, Mode::Blackhole)?;
                // B waits for the lock, then sells (or finds the unit sold).
                let second = buy_in_background(&b, product, "second-buyer").await?;
                // A's write was sent by now, into the partition or not.
                let answered = started + Duration::from_millis(settings.work_ms) + ANSWER_GRACE;
                let early = tokio::time::timeout_at(answered.into(), &mut holder).await;
                set_links(lab, &home, Mode::Pass)?;
                let first = match early {
                    Ok(first) => first?,
                    Err(_) => holder.await?,
                };
                tokio::time::sleep(LANDING).await;
                let row = ctx
                    .scripted_row(&b, product, &[first, second], started)
                    .await?;
                rows.push(judge(row, Scenario::Partition, variant, expect));
            }
        }
        Ok(rows)
    })
    .await
}

/// Switches instance A's links to the lock's backend, naming the fault in
/// the log.
fn set_links(lab: &Lab, home: &Home, mode: Mode) -> anyhow::Result<()> {
    let instance = &lab.info.instances[0].name;
    for backend in home.links {
        eprintln!("  fault: {mode:?} {instance} -> {}", backend.name());
        lab.partition(instance, *backend, mode)?;
    }
    Ok(())
}
