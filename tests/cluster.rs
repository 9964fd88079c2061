//! A real Redis Cluster, as the lab builds it (`seckill::lab::cluster`):
//! three masters and a replica each, joined by `redis-cli --cluster
//! create`. What it must be before anything sells on it: every slot
//! served, the slots split evenly, each master with its own replica, and a
//! key answered only by the master of its slot.

use redis::Value;
use seckill::lab::cluster::{Cluster, SLOTS, peers};
use seckill::lab::durability::{AofFsync, Durability};
use seckill::product::keys;

/// The slot of `key`, as the cluster computes it.
async fn keyslot(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> u32 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .expect("CLUSTER KEYSLOT")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_builds_a_cluster_that_routes_each_slot_to_one_master() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::start(dir.path(), 3, true, Durability::Durable, AofFsync::Everysec)
        .await
        .expect("the cluster forms");

    let seen = peers(&cluster.masters[0].url())
        .await
        .expect("CLUSTER NODES");
    let masters: Vec<_> = seen.iter().filter(|p| p.master).collect();
    assert_eq!(masters.len(), 3, "{seen:?}");
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(masters.iter().map(|p| p.slots).sum::<u32>(), SLOTS);
    for master in &masters {
        // redis-cli splits the slots evenly: 5461 or 5462 each.
        assert!(master.slots.abs_diff(SLOTS / 3) <= 1, "{seen:?}");
    }
    for replica in &cluster.replicas {
        let role: Vec<Value> = redis::cmd("ROLE")
            .query_async(
                &mut redis::Client::open(replica.url())
                    .unwrap()
                    .get_multiplexed_async_connection()
                    .await
                    .expect("replica"),
            )
            .await
            .expect("ROLE");
        assert_eq!(role.first(), Some(&Value::BulkString(b"slave".to_vec())));
    }

    // A key lives on exactly one master: the others redirect with MOVED.
    let key = keys::stock(7);
    let mut answered = 0;
    let mut moved = 0;
    for master in &cluster.masters {
        let mut conn = redis::Client::open(master.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("master");
        match redis::cmd("SET")
            .arg(&key)
            .arg(100)
            .query_async::<()>(&mut conn)
            .await
        {
            Ok(()) => answered += 1,
            Err(error) => {
                assert_eq!(error.code(), Some("MOVED"), "{error}");
                moved += 1;
            }
        }
    }
    assert_eq!((answered, moved), (1, 2));

    // Today's key layout, measured: every key of one product shares its
    // shard's hash tag, so a product's segments are one slot on one
    // master (what spreading segments over the masters has to change).
    let mut conn = redis::Client::open(cluster.masters[0].url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("master");
    let stock_slot = keyslot(&mut conn, &keys::stock(7)).await;
    // The order stream a selling script writes is in the same slot.
    assert_eq!(keyslot(&mut conn, &keys::orders(7)).await, stock_slot);
    for k in 0..6 {
        assert_eq!(keyslot(&mut conn, &keys::segment(7, k)).await, stock_slot);
    }
    assert_ne!(keyslot(&mut conn, &keys::stock(8)).await, stock_slot);
    cluster.stop().await;
}
