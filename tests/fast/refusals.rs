//! A Redis that refuses a write it never ran: every buyer of a Redis-stock
//! strategy is told 503 `unavailable` with `Retry-After` (nothing was
//! sold; asking again later may succeed), never 500 `backend`, and every
//! 200 has its order. One test per refusal, each staged for real on a
//! Redis of the test's own (the lab's other backends are shared).
//!
//! Why "never ran": Redis decides each of these before it runs a command,
//! and inside a script (the selling script) only at the script's first
//! write — `scriptVerifyOOM` and `scriptVerifyWriteCommandAllow` in
//! Redis's `script.c` refuse only while `SCRIPT_WRITE_DIRTY` is unset —
//! so a refused sale wrote nothing.

use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{Method, StatusCode};
use redis::aio::MultiplexedConnection;
use seckill::lab::durability::Durability;
use seckill::lab::redis::{Node, node};
use serde_json::json;

use crate::app::{app_on, buy, call, reset};

/// A Redis of the test's own, an app on it, a product sold from it, and
/// a connection to fault it with.
struct Own {
    node: Node,
    dir: tempfile::TempDir,
    app: Router,
    redis: MultiplexedConnection,
    id: i64,
}

impl Own {
    async fn start(id: i64, mode: Durability, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let extra: Vec<String> = extra.iter().map(|a| (*a).to_owned()).collect();
        let node = node(dir.path(), "own", mode, &extra)
            .await
            .expect("redis-server");
        let app = app_on(&node.url(), &[]).await;
        let mut redis = redis::Client::open(node.url())
            .expect("url")
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        // The faults (DEBUG POPULATE, SAVE) can take longer than redis-rs's
        // default 500 ms on a loaded machine.
        redis.set_response_timeout(Duration::from_secs(60));
        reset(&app, id, json!({"stock": 10, "strategy": "redis-lua"})).await;
        let own = Self {
            node,
            dir,
            app,
            redis,
            id,
        };
        own.sells("before the refusal").await;
        own
    }

    async fn cmd(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query_async(&mut self.redis.clone()).await
    }

    async fn sells(&self, when: &str) {
        let answer = buy(&self.app, self.id, "buyer").await;
        assert_eq!(answer.status, StatusCode::OK, "{when}: {}", answer.body);
    }

    /// A buy now is refused as `unavailable`, with a retry hint.
    async fn refused(&self, refusal: &str) {
        let answer = buy(&self.app, self.id, "buyer").await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            "{refusal}: {}",
            answer.body
        );
        assert!(answer.headers.contains_key("retry-after"), "{refusal}");
    }

    /// Every 200 has its order, and nothing else sold.
    async fn sold(&self, sales: i64) {
        let path = format!("/stock/{}", self.id);
        let ledger = call(&self.app, Method::GET, &path, &[], None).await;
        assert_eq!(ledger.status, StatusCode::OK, "{}", ledger.body);
        assert_eq!(ledger.body["sold"], sales, "{}", ledger.body);
        assert_eq!(ledger.body["remaining"], 10 - sales, "{}", ledger.body);
    }

    /// Polls `done` every 10 ms for up to 10 s.
    async fn until<F: AsyncFnMut(&Self) -> bool>(&self, what: &str, mut done: F) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(self).await {
            assert!(Instant::now() < deadline, "not {what} after 10 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// `maxmemory` reached under `noeviction`: `OOM`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_memory_is_unavailable() {
    let own = Own::start(7001, Durability::Durable, &[]).await;
    own.cmd(&["CONFIG", "SET", "maxmemory", "1"])
        .await
        .expect("config");
    own.refused("OOM").await;
    own.cmd(&["CONFIG", "SET", "maxmemory", "0"])
        .await
        .expect("config");
    own.sells("after maxmemory is lifted").await;
    own.sold(2).await;
}

/// The last background save failed (its directory is gone):
/// `stop-writes-on-bgsave-error` makes every write `MISCONF`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_background_save_is_unavailable() {
    let own = Own::start(7002, Durability::Durable, &["--save", "3600 1"]).await;
    std::fs::remove_dir_all(own.dir.path().join("own")).expect("remove the data directory");
    own.cmd(&["BGSAVE"]).await.expect("bgsave");
    own.until("failed to save", async |own| {
        let info = own.cmd(&["INFO", "persistence"]).await.expect("info");
        let text: String = redis::from_redis_value(info).expect("text");
        text.contains("rdb_last_bgsave_status:err") && text.contains("rdb_bgsave_in_progress:0")
    })
    .await;
    own.refused("MISCONF").await;
    own.cmd(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "no"])
        .await
        .expect("config");
    own.sells("with writes allowed again").await;
    own.sold(2).await;
}

/// A script runs past `busy-reply-threshold`: everyone else is told
/// `BUSY` until it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_script_is_unavailable() {
    let own = Own::start(7003, Durability::Durable, &["--busy-reply-threshold", "50"]).await;
    let spin = "local t0 = redis.call('TIME') \
                while true do local t = redis.call('TIME') \
                if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > 1500000 then return 1 end end";
    // Its own answer comes after the client's response timeout: not
    // waited for; the probe below sees when it has ended.
    let mut blocked = own.redis.clone();
    tokio::spawn(async move {
        let _ = redis::cmd("EVAL")
            .arg(spin)
            .arg(0)
            .query_async::<i64>(&mut blocked)
            .await;
    });
    // Past the threshold the server answers others again, with BUSY.
    let mut probe = redis::Client::open(own.node.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("probe connection");
    own.until("busy", async |_| {
        let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut probe).await;
        pong.is_err_and(|e| e.code() == Some("BUSY"))
    })
    .await;
    own.refused("BUSY").await;
    own.until("done with the script", async |_| {
        let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut probe).await;
        pong.is_ok()
    })
    .await;
    own.sells("once the script ended").await;
    own.sold(2).await;
}

/// Restarted, it loads its data before it serves (`key-load-delay` makes
/// that last seconds): `LOADING`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loading_after_a_restart_is_unavailable() {
    let flags = [
        "--enable-debug-command",
        "local",
        "--key-load-delay",
        "200",
        "--loading-process-events-interval-bytes",
        "1024",
    ];
    let mut own = Own::start(7004, Durability::Fast, &flags).await;
    own.cmd(&["DEBUG", "POPULATE", "20000", "filler", "32"])
        .await
        .expect("populate");
    own.cmd(&["SAVE"]).await.expect("save");
    let _ = own.cmd(&["SHUTDOWN", "NOSAVE"]).await;
    own.node.process.restart().await.expect("restart");
    let url = own.node.url();
    own.until("loading", async |_| {
        let Ok(client) = redis::Client::open(url.as_str()) else {
            return false;
        };
        let Ok(mut probe) = client.get_multiplexed_async_connection().await else {
            return false;
        };
        let pong: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut probe).await;
        pong.is_err_and(|e| e.code() == Some("LOADING"))
    })
    .await;
    own.refused("LOADING").await;
    own.until("loaded", async |own| {
        buy(&own.app, own.id, "buyer").await.status == StatusCode::OK
    })
    .await;
    own.sold(2).await;
}

/// Demoted to a replica (of a master that is not there): `READONLY`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_demoted_master_is_unavailable() {
    let own = Own::start(7005, Durability::Durable, &[]).await;
    own.cmd(&["REPLICAOF", "127.0.0.1", "1"])
        .await
        .expect("replicaof");
    own.refused("READONLY").await;
    own.cmd(&["REPLICAOF", "NO", "ONE"])
        .await
        .expect("replicaof no one");
    own.sells("promoted again").await;
    own.sold(2).await;
}
