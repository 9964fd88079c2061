//! Lock mechanics checked directly against the lab's Redis.

use seckill::lock::redisson::{try_lock, unlock};

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
    use seckill::race::client::BuyResult;

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
