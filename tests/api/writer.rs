//! The order writer: orders sold through Redis reach PostgreSQL, and orders
//! a dead consumer left pending are claimed by a live one.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use redis::AsyncCommands;
use redis::streams::StreamReadOptions;
use serde_json::json;
use sqlx::Connection;

use crate::harness;
use crate::harness::TestLab;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_left_pending_by_a_dead_consumer_are_claimed() {
    // A lab of its own: its instance is frozen while a "ghost" consumer
    // takes an order from the stream and dies without acknowledging it.
    let lab = TestLab::start(1);
    let gateway = lab.gateway();
    gateway
        .reset(301, &json!({"stock": 5, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    let pid = Pid::from_raw(lab.info.instances[0].pid.expect("pid") as i32);

    let redis = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
    let mut conn = redis
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let order_id = uuid::Uuid::now_v7().to_string();
    let stream = seckill::model::product::keys::orders(301);
    kill(pid, Signal::SIGSTOP).expect("freeze the instance");
    // Let the frozen writer's blocking read (100 ms) time out on the
    // server, or Redis would hand it our entry.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _: String = conn
        .xadd(
            &stream,
            "*",
            &[
                ("order", order_id.as_str()),
                ("product", "301"),
                ("epoch", "1"),
                ("user", "ghost-buyer"),
                ("strategy", "redis-lua"),
                ("served_by", "ghost"),
            ],
        )
        .await
        .expect("xadd");
    let options = StreamReadOptions::default()
        .group("order-writers", "ghost")
        .count(10);
    let taken: redis::streams::StreamReadReply = conn
        .xread_options(&[&stream], &[">"], &options)
        .await
        .expect("ghost read");
    kill(pid, Signal::SIGCONT).expect("resume the instance");
    assert_eq!(taken.keys[0].ids.len(), 1, "the ghost holds our entry");

    let mut pg = sqlx::PgConnection::connect(&lab.info.postgres_url)
        .await
        .expect("pg");
    let started = Instant::now();
    loop {
        let stored: i64 =
            sqlx::query_scalar("SELECT count(*) FROM orders WHERE order_id = $1::uuid")
                .bind(&order_id)
                .fetch_one(&mut pg)
                .await
                .expect("count");
        if stored == 1 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the abandoned order was never claimed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pending: redis::streams::StreamPendingReply = conn
        .xpending(&stream, "order-writers")
        .await
        .expect("xpending");
    assert_eq!(pending.count(), 0, "claimed entries are acknowledged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_longer_than_a_page_is_read_whole_and_once() {
    // A scratch stream no writer drains: 2,000 entries end on a page's
    // boundary (the last page full, then an empty one), 2,345 inside one.
    let redis = redis::Client::open(harness::shared().info.redis_url.as_str()).expect("redis");
    let conn = redis
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let mut shared = seckill::backends::conn::RedisConn::Single(conn.clone());
    for (name, length) in [("boundary", 2_000), ("inside", 2_345), ("empty", 0)] {
        let stream = format!("test:read-all:{name}:{}", uuid::Uuid::now_v7());
        let mut pipe = redis::pipe();
        for n in 0..length {
            pipe.xadd(&stream, "*", &[("n", n)]).ignore();
        }
        if length > 0 {
            let () = pipe.query_async(&mut conn.clone()).await.expect("xadd");
        }
        let entries = seckill::model::order::stream::read_all(&mut shared, &stream)
            .await
            .expect("read_all");
        let read: Vec<i64> = entries
            .iter()
            .map(|e| e.get::<i64>("n").expect("field n"))
            .collect();
        assert_eq!(
            read,
            (0..length).collect::<Vec<_>>(),
            "{name}: every entry once, in order"
        );
        let _: () = conn.clone().del(&stream).await.expect("del");
    }
}
