//! A real Redis Cluster, as the lab builds it (`seckill::lab::cluster`):
//! three masters and a replica each, joined by `redis-cli --cluster
//! create`. What it must be before anything sells on it: every slot
//! served, the slots split evenly, each master with its own replica, and a
//! key answered only by the master of its slot.

use seckill_harness as harness;

use redis::Value;
use seckill::lab::cluster::{Cluster, SLOTS, peers};
use seckill::lab::durability::Durability;
use seckill::model::product::keys;
use seckill::model::product::keys::Place;

/// The slot of `key`, as the cluster computes it.
async fn keyslot(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> u32 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .expect("CLUSTER KEYSLOT")
}

/// `CLUSTER SLOTS`: each range of slots and the `host:port` of its master.
async fn slot_ranges(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(u32, u32, String)> {
    let reply: Vec<Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query_async(conn)
        .await
        .expect("CLUSTER SLOTS");
    reply
        .into_iter()
        .map(|range| {
            let Value::Array(parts) = range else {
                panic!("a range: {range:?}")
            };
            let int = |v: &Value| match v {
                Value::Int(n) => *n as u32,
                other => panic!("a slot: {other:?}"),
            };
            let Value::Array(master) = &parts[2] else {
                panic!("a master: {parts:?}")
            };
            let host = match &master[0] {
                Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("a host: {other:?}"),
            };
            (
                int(&parts[0]),
                int(&parts[1]),
                format!("{host}:{}", int(&master[1])),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_builds_a_cluster_that_routes_each_slot_to_one_master() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::start(dir.path(), 3, true, Durability::Durable)
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

    // The key layout, measured on the server: every key of one product
    // shares its home's hash tag with the order stream its scripts write,
    // and the six segments of a product spread over the three masters,
    // two each, each in a slot of its own place.
    let mut conn = redis::Client::open(cluster.masters[0].url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("master");
    let stock_slot = keyslot(&mut conn, &keys::stock(7)).await;
    assert_eq!(keyslot(&mut conn, &keys::orders(7)).await, stock_slot);
    assert_eq!(keyslot(&mut conn, &keys::buyers(7)).await, stock_slot);
    assert_ne!(keyslot(&mut conn, &keys::stock(8)).await, stock_slot);
    let ranges = slot_ranges(&mut conn).await;
    let mut per_master = std::collections::HashMap::new();
    for k in 0..6 {
        let place = Place::segment(7, k, 6);
        let slot = keyslot(&mut conn, &keys::segment(7, k, 6)).await;
        assert_eq!(slot, u32::from(place.slot()), "segment {k}");
        assert_eq!(keyslot(&mut conn, &place.orders()).await, slot);
        assert_eq!(keyslot(&mut conn, &place.epoch()).await, slot);
        let master = ranges
            .iter()
            .find(|(from, to, _)| (*from..=*to).contains(&slot))
            .map(|(_, _, addr)| addr.clone())
            .expect("a master serves the slot");
        *per_master.entry(master).or_insert(0) += 1;
    }
    assert_eq!(per_master.len(), 3, "{per_master:?}");
    assert!(per_master.values().all(|&n| n == 2), "{per_master:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stock_endpoint_shows_each_segment_on_its_master() {
    let lab = harness::TestLab::start_with(1, &["--redis-cluster"], &[]);
    let masters = lab
        .info
        .cluster
        .as_ref()
        .expect("a cluster")
        .masters
        .clone();
    assert_eq!(masters.len(), 3);
    let gateway = lab.gateway();
    let six = seckill::model::product::Settings {
        segments: 6,
        ..Default::default()
    };
    seckill::race::driver::reset(&gateway, 31, "segmented", 60, six)
        .await
        .expect("reset");
    let ledger = gateway.ledger(31).await.expect("GET /stock/31");
    let placement = ledger.placement.expect("a placement");
    assert_eq!(placement.len(), 6, "{placement:?}");
    for (k, placed) in placement.iter().enumerate() {
        assert_eq!(placed.key, keys::segment(31, k as u32, 6));
        assert_eq!(placed.slot, Place::segment(31, k as u32, 6).slot());
    }
    for master in &masters {
        let here = placement
            .iter()
            .filter(|p| p.master.as_deref() == Some(master.as_str()))
            .count();
        assert_eq!(here, 2, "{master}: {placement:?}");
    }
    assert_eq!(ledger.remaining, 60);
    // One product at home: one counter, on the master of its slot.
    seckill::race::driver::reset(&gateway, 32, "redis-lua", 5, Default::default())
        .await
        .expect("reset");
    let placement = gateway.ledger(32).await.unwrap().placement.unwrap();
    assert_eq!(placement.len(), 1);
    assert_eq!(placement[0].key, keys::stock(32));
    assert!(masters.contains(placement[0].master.as_ref().expect("a master")));
}
