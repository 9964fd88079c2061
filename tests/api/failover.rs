//! Instances that find the main Redis through Sentinel follow a promotion
//! (`seckill lab --redis-sentinel`). The failover here is a manual one
//! (`SENTINEL FAILOVER`): the old master stays up, and Sentinel turns it
//! into a replica and disconnects its clients. Every instance's pool,
//! order writer and sold-out listener must then find the new master. (A
//! crashed master is the `redis-failover` scenario's; a demotion that
//! disconnects nobody, tests/labs/sentinel.rs's.)

use std::time::{Duration, Instant};

use seckill::lab::client::BuyResult;
use seckill::lab::sentinel;
use seckill::lab::sentinel::MASTER_NAME;
use seckill::race::driver::drained_ledger;
use serde_json::json;

use crate::harness::TestLab;

/// Polls `check` every 50 ms until it holds, failing after 30 s.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: not after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_follow_a_promotion_and_leave_the_demoted_master() {
    let lab = TestLab::start_with(2, &["--redis-sentinel"], &[]);
    let topology = lab.info.sentinel.clone().expect("a sentinel topology");
    let (a, b) = (lab.instance(0), lab.instance(1));
    a.reset(821, &json!({"stock": 10, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    // Every instance's pool, order writer and listener on the first master.
    assert_eq!(a.buy(821, "a-before").await, BuyResult::Ok);
    assert_eq!(b.buy(821, "b-before").await, BuyResult::Ok);

    let sentinels: Vec<String> = topology
        .sentinels
        .iter()
        .map(|s| format!("redis://{s}"))
        .collect();
    let old = sentinel::master_addr(&sentinels[0]).await.expect("master");
    let () = sentinel::command(
        &sentinels[0],
        redis::cmd("SENTINEL").arg("FAILOVER").arg(MASTER_NAME),
    )
    .await
    .expect("SENTINEL FAILOVER");
    let new = sentinel::wait_failover(&sentinels, old, Duration::from_secs(30))
        .await
        .expect("a failover");
    assert_eq!(new.to_string(), topology.replica_url["redis://".len()..]);
    eventually("the old master is a replica", || async {
        sentinel::replication(&topology.master_url)
            .await
            .is_ok_and(|r| r.role == "slave")
    })
    .await;

    // The pools replace the connections Sentinel cut with connections to
    // the new master.
    for i in 0..3 {
        assert_eq!(a.buy(821, &format!("a-after-{i}")).await, BuyResult::Ok);
        assert_eq!(b.buy(821, &format!("b-after-{i}")).await, BuyResult::Ok);
    }
    // The order writers moved too: the new master's stream drains.
    let ledger = drained_ledger(&a, 821).await.expect("a drained ledger");
    assert_eq!((ledger.sold, ledger.remaining), (8, 2), "{ledger:?}");

    // So did both sold-out listeners, and a restock reaches both again.
    let new_url = format!("redis://{new}");
    eventually("both listeners subscribe on the new master", || async {
        sentinel::command::<(String, u64)>(
            &new_url,
            redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(seckill::sale::memory::RESETS),
        )
        .await
        .is_ok_and(|(_, subscribers)| subscribers == 2)
    })
    .await;
    let sold_out = BuyResult::Failed("sold_out".into());
    a.reset(822, &json!({"stock": 1, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    assert_eq!(a.buy(822, "first").await, BuyResult::Ok);
    assert_eq!(a.buy(822, "late-a").await, sold_out);
    assert_eq!(b.buy(822, "late-b").await, sold_out);
    a.reset(822, &json!({"stock": 2, "strategy": "redis-lua"}))
        .await
        .expect("restock");
    assert_eq!(a.buy(822, "again-a").await, BuyResult::Ok);
    assert_eq!(b.buy(822, "again-b").await, BuyResult::Ok);
}
