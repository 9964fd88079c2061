//! `Idempotency-Key`: a retry returns the original order, concurrent
//! requests with one key make one order, and keys expire.

use std::time::Duration;

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestLab, http, shared};

/// Status, body and whether the answer was a replay.
async fn buy(base: &str, product: i64, user: &str, key: &str) -> (StatusCode, Value, bool) {
    let response = http()
        .post(format!("{base}/stock/{product}/buy"))
        .header("X-User-Id", user)
        .header("Idempotency-Key", key)
        .send()
        .await
        .expect("buy");
    let status = response.status();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    (status, response.json().await.expect("json"), replayed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_returns_the_original_order_even_after_the_sell_out() {
    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    for (id, strategy) in [(1200, "redis-lua"), (1201, "db-pessimistic")] {
        lab.gateway()
            .reset(id, &json!({"stock": 1, "strategy": strategy}))
            .await
            .expect("reset");
        let (status, first, replayed) = buy(base, id, "alice", "order-1").await;
        assert_eq!(status, StatusCode::OK, "{strategy}: {first}");
        assert!(!replayed);
        // Sold out now: a new key is refused, the old one still answers
        // with its order, from either instance.
        let (status, body, _) = buy(base, id, "alice", "order-2").await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        for _ in 0..2 {
            let (status, again, replayed) = buy(base, id, "alice", "order-1").await;
            assert_eq!(status, StatusCode::OK, "{strategy}: {again}");
            assert!(replayed);
            assert_eq!(again["order_id"], first["order_id"]);
        }
        // The key belongs to alice: bob with the same key is a new buy.
        let (status, _, replayed) = buy(base, id, "bob", "order-1").await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert!(!replayed);
        assert_eq!(lab.gateway().ledger(id).await.expect("ledger").sold, 1);
    }
}

/// A retry with its key after the sale window closed (what a client does
/// after nginx's own 502/504, which carries no order id) is answered its
/// order, not 410 `ended`; a new key is refused `ended` and buys nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_close_is_answered_its_order() {
    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    for (id, strategy) in [(1205, "redis-lua"), (1206, "db-atomic")] {
        let now = seckill::model::product::now_ms();
        let window = json!({"stock": 5, "strategy": strategy,
                            "opens_at_ms": now - 1_000, "closes_at_ms": now + 1_000});
        lab.gateway().reset(id, &window).await.expect("reset");
        let (status, first, _) = buy(base, id, "closing", "close-1").await;
        assert_eq!(status, StatusCode::OK, "{strategy}: {first}");
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        for _ in 0..2 {
            let (status, again, replayed) = buy(base, id, "closing", "close-1").await;
            assert_eq!(status, StatusCode::OK, "{strategy}: {again}");
            assert!(replayed);
            assert_eq!(again["order_id"], first["order_id"]);
        }
        let (status, body, _) = buy(base, id, "closing", "close-2").await;
        assert_eq!(status, StatusCode::GONE, "{body}");
        assert_eq!(body["error"]["code"], "ended", "{body}");
        assert_eq!(lab.gateway().ledger(id).await.expect("ledger").sold, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_with_one_key_make_one_order() {
    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    for (id, strategy) in [(1210, "redis-lock"), (1211, "db-atomic")] {
        // 100 ms inside the section: the duplicates arrive while the first
        // is still selling.
        lab.gateway()
            .reset(
                id,
                &json!({"stock": 10, "strategy": strategy, "work_ms": 100}),
            )
            .await
            .expect("reset");
        let answers = join_all((0..10).map(|_| buy(base, id, "clicker", "double-click"))).await;
        let first = &answers[0].1["order_id"];
        for (status, body, _) in &answers {
            assert_eq!(*status, StatusCode::OK, "{strategy}: {body}");
            assert_eq!(&body["order_id"], first, "{strategy}: {answers:?}");
        }
        assert_eq!(answers.iter().filter(|a| !a.2).count(), 1, "one original");
        let ledger = lab.gateway().ledger(id).await.expect("ledger");
        assert_eq!((ledger.sold, ledger.remaining), (1, 9), "{strategy}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_buy_does_not_keep_its_key() {
    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    lab.gateway()
        .reset(
            1220,
            &json!({"stock": 5, "strategy": "redis-lua", "per_user_limit": 1}),
        )
        .await
        .expect("reset");
    assert_eq!(buy(base, 1220, "carol", "first").await.0, StatusCode::OK);
    let (status, body, _) = buy(base, 1220, "carol", "second").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "limit_reached");
    // The refused claim was withdrawn, not kept as an answer: asking again
    // is a real (and again refused) buy, not a replay of a refusal.
    let (status, body, replayed) = buy(base, 1220, "carol", "second").await;
    assert_eq!(body["error"]["code"], "limit_reached");
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(!replayed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_expire_after_the_configured_time() {
    let lab = TestLab::start_with(1, &[], &[("SECKILL_IDEMPOTENCY_TTL_SECS", "1")]);
    let base = lab.info.gateway_url.as_str();
    lab.gateway()
        .reset(1230, &json!({"stock": 5, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    let (_, first, _) = buy(base, 1230, "dave", "k").await;
    let (_, replay, replayed) = buy(base, 1230, "dave", "k").await;
    assert!(replayed);
    assert_eq!(replay["order_id"], first["order_id"]);
    // Redis expires the key; after that the same key is a new purchase.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (status, later, replayed) = buy(base, 1230, "dave", "k").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!replayed);
    assert_ne!(later["order_id"], first["order_id"]);
    assert_eq!(lab.gateway().ledger(1230).await.expect("ledger").sold, 2);
}

/// A claim left pending by a sale whose outcome was unknown: a retry with
/// its key finds the order (200, the same order id), or, once the claim
/// has settled without an order, buys; while it is fresh, `busy`. The
/// unknown state is written into Redis as a dead instance would leave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_an_unknown_outcome_learns_which() {
    use seckill::model::product::keys;
    use seckill::sale::idempotency::SETTLE;

    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    let id = 1230;
    // A short wait for a pending key, so the test does not wait 6 s.
    let body = json!({"stock": 5, "strategy": "redis-lua", "acquire_timeout_ms": 50});
    let product = lab.gateway().reset(id, &body).await.expect("reset");
    let epoch = product["epoch"].as_i64().expect("epoch");
    let client = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let settled = now_ms - SETTLE.as_millis() - 1_000;
    let mut leave = async |user: &str, key: &str, order: &str, since: u128| {
        let _: () = redis::cmd("SET")
            .arg(keys::idempotency(id, epoch, user, key))
            .arg(format!("pending:{order}:{since}"))
            .arg("PX")
            .arg(60_000)
            .query_async(&mut redis)
            .await
            .expect("set");
    };

    // It did sell: the order exists, its answer was never recorded.
    let (status, sold, _) = buy(base, id, "carol", "k-sold").await;
    assert_eq!(status, StatusCode::OK, "{sold}");
    let order = sold["order_id"].as_str().expect("order id").to_owned();
    leave("carol", "k-sold", &order, settled).await;
    let (status, again, replayed) = buy(base, id, "carol", "k-sold").await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert!(replayed);
    assert_eq!(again["order_id"], sold["order_id"]);

    // It did not sell, and the claim has settled: the retry buys.
    let never = uuid::Uuid::now_v7().to_string();
    leave("dave", "k-lost", &never, settled).await;
    let (status, bought, replayed) = buy(base, id, "dave", "k-lost").await;
    assert_eq!(status, StatusCode::OK, "{bought}");
    assert!(!replayed);
    assert_ne!(bought["order_id"].as_str(), Some(never.as_str()));

    // Not settled yet: come back later, nothing sold.
    leave("erin", "k-fresh", &never, now_ms).await;
    let (status, busy, _) = buy(base, id, "erin", "k-fresh").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{busy}");
    assert_eq!(busy["error"]["code"], "busy");
    assert_eq!(lab.gateway().ledger(id).await.expect("ledger").sold, 2);
}

/// The lost answer, on every store: a keyed sale commits, its answer is
/// lost (the claim stays `pending:<order>:<ms>`, as an `outcome_unknown`
/// leaves it) until past the settle time, and the buyer retries with the
/// key. The retry must find the first order wherever the store put it
/// and replay it — sold 1 — under every strategy, from every store it
/// takes. (On MySQL it once sold again: the order was looked for only in
/// PostgreSQL and the streams.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_is_replayed_on_every_store() {
    use seckill::model::product::keys;
    use seckill::sale::idempotency::SETTLE;
    use seckill::stock::strategy::Catalogue;

    let lab = shared();
    let base = lab.info.gateway_url.as_str();
    let client = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
    let redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    let settled = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        - SETTLE.as_millis()
        - 1_000;
    let cases: Vec<(i64, &'static str, &'static str)> = Catalogue::new()
        .infos()
        .into_iter()
        .flat_map(|info| info.stores.iter().map(move |s| (info.id, s.as_str())))
        .zip(6000..)
        .map(|((strategy, store), id)| (id, strategy, store))
        .collect();
    assert!(cases.iter().any(|c| c.2 == "mysql") && cases.len() > 20);
    let lose_and_retry = async |(id, strategy, store): (i64, &'static str, &'static str)| {
        // The default acquire_timeout_ms: every lock must be able to sell
        // its one unit while all cases run at once. The retry waits that
        // long (plus a second) for the pending claim before it looks.
        let body = json!({"stock": 5, "strategy": strategy, "store": store});
        let product = lab.gateway().reset(id, &body).await.expect("reset");
        let epoch = product["epoch"].as_i64().expect("epoch");
        let (status, first, _) = buy(base, id, "lost", "k").await;
        assert_eq!(status, StatusCode::OK, "{strategy}@{store}: {first}");
        let order = first["order_id"].as_str().expect("order id").to_owned();
        let _: () = redis::cmd("SET")
            .arg(keys::idempotency(id, epoch, "lost", "k"))
            .arg(format!("pending:{order}:{settled}"))
            .arg("PX")
            .arg(60_000)
            .query_async(&mut redis.clone())
            .await
            .expect("set");
        let (status, again, replayed) = buy(base, id, "lost", "k").await;
        let ledger = lab.gateway().ledger(id).await.expect("ledger");
        (
            strategy,
            store,
            status,
            again["order_id"] == first["order_id"] && replayed,
            ledger.sold,
        )
    };
    let results = join_all(cases.into_iter().map(lose_and_retry)).await;
    let wrong: Vec<_> = results
        .iter()
        .filter(|(_, _, status, same, sold)| *status != StatusCode::OK || !same || *sold != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "a retry did not replay the first order: {wrong:?}"
    );
}

/// A claim's age is judged on the shared clock. Staged: instance A takes a
/// keyed buy (`db-atomic` holding its row lock through 2 s of work) and is
/// frozen (SIGSTOP) inside it; the retry with the key goes to an instance
/// whose clock runs 60 s ahead, past the wait a retry gives the first
/// seller (3.1 s here) but long before the claim is old enough to take
/// over (10 s). The retry must answer `busy`: judged by its own clock the
/// claim looked a minute old, it took it over, queued on the row lock, and
/// when A woke both sales committed — two orders for one key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_an_instance_whose_clock_runs_ahead_does_not_take_over() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    // Its own lab: an instance is frozen.
    let lab = TestLab::start(1);
    let ahead = seckill::lab::clock_off("+60s").expect("libfaketime");
    let skewed = crate::harness::Outside::start(&lab, "instance-ahead", &ahead).await;
    let first = lab.info.instances[0].url.clone();
    let body =
        json!({"stock": 5, "strategy": "db-atomic", "work_ms": 2_000, "acquire_timeout_ms": 100});
    lab.gateway().reset(1230, &body).await.expect("reset");
    let selling = tokio::spawn(async move { buy(&first, 1230, "slow", "skew-1").await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a = Pid::from_raw(lab.info.instances[0].pid.expect("pid") as i32);
    kill(a, Signal::SIGSTOP).expect("freeze A");
    let retry = http()
        .post(format!("{}/stock/1230/buy", skewed.url))
        .header("X-User-Id", "slow")
        .header("Idempotency-Key", "skew-1")
        .timeout(Duration::from_secs(6))
        .send()
        .await;
    kill(a, Signal::SIGCONT).expect("resume A");
    let retry = retry.expect("the retry is answered while A is frozen");
    assert_eq!(retry.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body: Value = retry.json().await.expect("json");
    assert_eq!(body["error"]["code"], "busy", "{body}");
    let (status, sold, _) = selling.await.expect("joined");
    assert_eq!(status, StatusCode::OK, "{sold}");
    // Whatever the skewed instance might still do, one order for one key.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let ledger = seckill::race::driver::drained_ledger(&lab.gateway(), 1230)
        .await
        .expect("ledger");
    assert_eq!(ledger.sold, 1, "{ledger:?}");
}
