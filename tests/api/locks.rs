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
