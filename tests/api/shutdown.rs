//! Graceful shutdown: SIGTERM lets an in-flight buy finish and the order
//! writer drain before the instance exits.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use sqlx::Connection;

use crate::harness::TestLab;

/// True while the process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_in_flight_buys_and_drains_the_writer() {
    let lab = TestLab::start(1);
    let gateway = lab.gateway();
    gateway
        .reset(
            401,
            &json!({"stock": 3, "strategy": "redis-lock", "work_ms": 700}),
        )
        .await
        .expect("reset");
    let buying = {
        let gateway = gateway.clone();
        tokio::spawn(async move { gateway.buy(401, "in-flight").await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pid = lab.info.instances[0].pid.expect("pid");
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).expect("SIGTERM");

    let result = buying.await.expect("buyer");
    assert_eq!(
        result,
        seckill::lab::client::BuyResult::Ok,
        "the in-flight buy completes"
    );
    let started = Instant::now();
    while alive(pid) {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "instance did not exit"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut pg = sqlx::PgConnection::connect(&lab.info.postgres_url)
        .await
        .expect("pg");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM orders WHERE product_id = 401")
        .fetch_one(&mut pg)
        .await
        .expect("count");
    assert_eq!(
        stored, 1,
        "the order reached PostgreSQL before the instance exited"
    );
}
