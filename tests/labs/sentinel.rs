//! A Sentinel failover loses a write the old master acknowledged: the
//! mechanism behind the argument against locks on a replicated Redis (a
//! lock taken on the master, lost in the failover, taken again by someone
//! else). Real servers: a master, a replica, three sentinels.
//!
//! Freezing the replica for a moment is not enough to lose the write: the
//! kernel keeps receiving into a frozen process's socket, so the replica
//! finds the write waiting when it resumes. What loses it is a replica
//! frozen (or partitioned) for longer than `repl-timeout`: the master drops
//! it and goes on acknowledging writes it alone holds.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use redis::AsyncCommands;
use redis::sentinel::{SentinelClient, SentinelServerType};
use seckill::backends::master::MainRedis;
use seckill::lab::durability::Durability;
use seckill::lab::sentinel;
use seckill::lab::sentinel::{MASTER_NAME, Topology};

/// Polls `check` every 50 ms until it holds, failing after `timeout`.
async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < timeout, "{what}: not after {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_loses_a_write_the_old_master_acknowledged() {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    let topology = Topology::start(dir.path(), Durability::Durable)
        .await
        .expect("topology starts");
    eprintln!("topology ready in {:?}", started.elapsed());
    let sentinels = topology.sentinel_urls();
    let (master, replica) = (topology.master.url(), topology.replica.url());
    for url in &sentinels {
        let named = sentinel::master_addr(url)
            .await
            .expect("a sentinel answers");
        assert_eq!(named, topology.master.addr, "{url} names the master");
    }

    // A client that follows the master through the sentinels: it asks them
    // where the master is each time it connects.
    let mut client = SentinelClient::build(
        sentinels.clone(),
        MASTER_NAME.to_owned(),
        None,
        SentinelServerType::Master,
    )
    .expect("a sentinel client");
    let mut conn = client
        .get_async_connection()
        .await
        .expect("connects to the master");
    let () = conn.set("first", 1).await.expect("SET first");
    eventually(
        "the replica has the first write",
        Duration::from_secs(5),
        || async {
            let on_master = sentinel::replication(&master).await.expect("master").offset;
            let on_replica = sentinel::replication(&replica)
                .await
                .expect("replica")
                .offset;
            on_master == on_replica
        },
    )
    .await;

    // The replica freezes; the master notices after repl-timeout and drops
    // it, then acknowledges a write nobody else has.
    topology
        .replica
        .process
        .signal(Signal::SIGSTOP)
        .expect("SIGSTOP");
    let frozen = Instant::now();
    eventually(
        "the master drops the frozen replica",
        Duration::from_secs(10),
        || async {
            sentinel::replication(&master)
                .await
                .is_ok_and(|r| r.connected_replicas == 0)
        },
    )
    .await;
    eprintln!(
        "the master dropped the replica after {:?}",
        frozen.elapsed()
    );
    let () = conn
        .set("second", 2)
        .await
        .expect("the master acknowledges");

    // The master crashes; the replica comes back; the sentinels promote it.
    topology
        .master
        .process
        .signal(Signal::SIGKILL)
        .expect("SIGKILL");
    let killed = Instant::now();
    topology
        .replica
        .process
        .signal(Signal::SIGCONT)
        .expect("SIGCONT");
    let promoted =
        sentinel::wait_failover(&sentinels, topology.master.addr, Duration::from_secs(20))
            .await
            .expect("a failover");
    eprintln!("failover in {:?} after the master died", killed.elapsed());
    assert_eq!(
        promoted, topology.replica.addr,
        "the replica is the master now"
    );

    // The old connection died with the old master; a new one from the same
    // client goes to the new master.
    let error = conn
        .get::<_, Option<i64>>("first")
        .await
        .expect_err("the old master is gone");
    assert!(
        error.is_io_error() || error.is_connection_dropped(),
        "{error:?}"
    );
    let mut conn = client
        .get_async_connection()
        .await
        .expect("the client finds the new master");
    let port: (String, u16) = redis::cmd("CONFIG")
        .arg("GET")
        .arg("port")
        .query_async(&mut conn)
        .await
        .expect("CONFIG GET port");
    assert_eq!(
        port.1,
        topology.replica.addr.port(),
        "connected to the promoted replica"
    );
    let first: Option<i64> = conn.get("first").await.expect("GET first");
    let second: Option<i64> = conn.get("second").await.expect("GET second");
    assert_eq!(first, Some(1), "the replicated write survives");
    assert_eq!(second, None, "the acknowledged write is lost");

    topology.stop().await;
}

/// A demotion Sentinel did not make (an operator's `REPLICAOF`) kills no
/// client: the pool's connection to the demoted server stays open and
/// would still answer `PING`, while every write on it is refused. The
/// checkout asks `ROLE` and drops it instead of handing it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_drops_its_connection_to_a_demoted_master() {
    let dir = tempfile::tempdir().expect("temp dir");
    let topology = Topology::start(dir.path(), Durability::Fast)
        .await
        .expect("topology starts");
    let main = MainRedis::sentinel(&topology.sentinel_urls(), MASTER_NAME).expect("sentinels");
    let pool = main.pool(1).expect("a pool");
    {
        let mut conn = pool.get().await.expect("a connection to the master");
        let () = conn.set("before", 1).await.expect("SET on the master");
    }
    assert_eq!(pool.status().size, 1, "the connection is back in the pool");

    // The sentinels frozen, nobody reconfigures or disconnects anything:
    // the roles are swapped by hand.
    for node in &topology.sentinels {
        node.process.signal(Signal::SIGSTOP).expect("SIGSTOP");
    }
    let (master, replica) = (topology.master.url(), topology.replica.url());
    sentinel::command::<()>(&replica, redis::cmd("REPLICAOF").arg("NO").arg("ONE"))
        .await
        .expect("the replica becomes a master");
    sentinel::command::<()>(
        &master,
        redis::cmd("REPLICAOF")
            .arg(topology.replica.addr.ip().to_string())
            .arg(topology.replica.addr.port()),
    )
    .await
    .expect("the master becomes its replica");
    eventually(
        "the old master is a replica",
        Duration::from_secs(5),
        || async {
            sentinel::replication(&master)
                .await
                .is_ok_and(|r| r.role == "slave")
        },
    )
    .await;

    // With the sentinels frozen no new connection can be made either, so
    // the checkout fails — having dropped the demoted server's connection.
    let checkout = pool.get().await;
    assert!(
        checkout.is_err(),
        "a connection to the demoted master was handed out"
    );
    assert_eq!(pool.status().size, 0, "the demoted connection was dropped");

    for node in &topology.sentinels {
        node.process.signal(Signal::SIGCONT).expect("SIGCONT");
    }
    topology.stop().await;
}
