//! Lock mechanics checked directly against the lab's Redis.

use seckill::stock::lock::redisson::{try_lock, unlock};

use crate::harness::shared;

#[tokio::test]
async fn redisson_is_reentrant_for_its_owner_only() {
    let lab = shared();
    let client = redis::Client::open(lab.info.redis_url.as_str()).expect("client");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let product = 501;
    assert_eq!(
        try_lock(&mut conn, product, "owner-a", 5000).await.unwrap(),
        None
    );
    assert_eq!(
        try_lock(&mut conn, product, "owner-a", 5000).await.unwrap(),
        None,
        "re-entry"
    );
    let ttl = try_lock(&mut conn, product, "owner-b", 5000).await.unwrap();
    assert!(ttl.is_some_and(|ms| ms > 0), "another owner waits: {ttl:?}");
    assert_eq!(
        unlock(&mut conn, product, "owner-b", 5000).await.unwrap(),
        None,
        "not b's lock"
    );
    assert_eq!(
        unlock(&mut conn, product, "owner-a", 5000).await.unwrap(),
        Some(false),
        "held once more"
    );
    assert!(
        try_lock(&mut conn, product, "owner-b", 5000)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        unlock(&mut conn, product, "owner-a", 5000).await.unwrap(),
        Some(true),
        "released"
    );
    assert_eq!(
        try_lock(&mut conn, product, "owner-b", 5000).await.unwrap(),
        None,
        "b takes it"
    );
    assert_eq!(
        unlock(&mut conn, product, "owner-b", 5000).await.unwrap(),
        Some(true)
    );
}

/// A pause longer than the ZooKeeper session ends it; the instance opens
/// a new one and the `zookeeper` strategy sells again, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_sells_again_after_its_session_expired() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use seckill::lab::client::BuyResult;

    // Its own lab: the instance is frozen, which the shared one's other
    // tests would feel.
    let lab = crate::harness::TestLab::start(1);
    let instance = lab.instance(0);
    let body = serde_json::json!({"stock": 5, "strategy": "zookeeper"});
    instance.reset(502, &body).await.expect("reset");
    assert_eq!(instance.buy(502, "before").await, BuyResult::Ok);
    let pid = Pid::from_raw(lab.info.instances[0].pid.expect("pid") as i32);
    kill(pid, Signal::SIGSTOP).expect("freeze");
    // The lab's instances ask for 2 s sessions.
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    kill(pid, Signal::SIGCONT).expect("resume");
    assert_eq!(instance.buy(502, "after").await, BuyResult::Ok);
}

/// etcd's lock is a lease of whole seconds; the watchdog renews it while
/// the holder works. Work of 2.5 s under a 1 s lease: without renewal the
/// lease would run out after 1 to 1.5 s and the second buyer, queued
/// behind it, would sell the one unit again.
#[tokio::test]
async fn etcd_watchdog_keeps_the_lock_through_work_longer_than_its_lease() {
    let lab = shared();
    let row = crate::harness::race_on(&lab.audit(), &lab.gateway(), crate::harness::Race { product: 503, strategy: "etcd", stock: 1, buyers: 2, concurrency: 2, pace: None, settings: serde_json::json!({"work_ms": 2500, "lease_ms": 1000, "acquire_timeout_ms": 8000}) })
    .await;
    assert_eq!(row.sold, 1, "{row:?}");
    assert_eq!(row.oversold, 0, "{row:?}");
}

/// Curator's read/write lock: a buyer holds the write lock through its
/// work, and a stock query is a reader, so it answers only once the
/// buyer's sale is in. Without the read lock the query would read the
/// stock mid-section, before the decrement (remaining 1).
#[tokio::test]
async fn zookeeper_read_write_makes_a_stock_query_wait_for_the_buyer() {
    use seckill::lab::client::BuyResult;

    let lab = shared();
    let gateway = lab.gateway();
    let body = serde_json::json!({
        "stock": 1,
        "strategy": "zookeeper",
        "recipe": "read-write",
        "work_ms": 1500,
    });
    gateway.reset(504, &body).await.expect("reset");
    let buyer = {
        let gateway = gateway.clone();
        tokio::spawn(async move { gateway.buy(504, "writer").await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let ledger = gateway.ledger(504).await.expect("ledger");
    assert_eq!(
        ledger.remaining, 0,
        "the query read mid-section: {ledger:?}"
    );
    assert_eq!(buyer.await.expect("buyer"), BuyResult::Ok);
}

/// A recipe is the `zookeeper` strategy's setting only: any other
/// strategy refuses one with a 400 that names who takes it.
#[tokio::test]
async fn a_recipe_is_refused_by_strategies_without_recipes() {
    let lab = shared();
    let body = serde_json::json!({"stock": 1, "strategy": "redis-lock", "recipe": "multi-lock"});
    let error = lab.gateway().reset(505, &body).await.expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("400") && text.contains("zookeeper"), "{text}");
}
