//! The shared clock against the lab's real Redis: a clock that starts a
//! minute off is set right by one sync, and order ids carry its time.

use redis::aio::ConnectionLike;
use seckill::backends::clock::SharedClock;
use seckill::model::product::hold_terms::made_at_ms;

use crate::app::lab;

/// Redis's `TIME`, in ms.
async fn redis_ms(conn: &mut impl ConnectionLike) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.expect("TIME");
    secs * 1000 + micros / 1000
}

#[tokio::test]
async fn one_sync_sets_a_clock_a_minute_off_to_redis_time() {
    let pool = seckill::backends::master::MainRedis::fixed(&lab().info.redis_url)
        .expect("url")
        .pool(2)
        .expect("a pool");
    let clock = SharedClock::off_by(60_000);
    let mut conn = pool.get().await.expect("a connection");
    let before = redis_ms(&mut conn).await;
    assert!(clock.now_ms() >= before + 59_000, "starts a minute ahead");
    let rtt = clock.sync(&pool).await.expect("sync");
    let (ours, theirs) = (clock.now_ms(), redis_ms(&mut conn).await);
    // Read after ours: Redis's is later by at most a round trip or two.
    let slack = 2 * rtt.as_millis() as u64 + 5;
    assert!(
        ours <= theirs + slack && theirs <= ours + slack + 50,
        "ours {ours}, Redis {theirs}"
    );
    // An order made now carries the shared clock's time.
    let made = made_at_ms(clock.order_id()).expect("a v7 id");
    assert!(made.abs_diff(clock.now_ms()) <= 5, "{made}");
}
