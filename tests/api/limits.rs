//! The per-buyer limit: one buyer's concurrent requests never get more than
//! `per_user_limit` units, under any strategy, and a refusal leaks no stock.

use futures::future::join_all;
use seckill::lab::client::BuyResult;
use serde_json::json;

use seckill::stock::strategy::Catalogue;

use crate::harness::shared;

const LIMIT: i64 = 2;
const STOCK: i64 = 10;
const REQUESTS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_buyers_concurrent_requests_get_at_most_the_limit_under_every_strategy() {
    let lab = shared();
    let gateway = lab.gateway();
    let catalog = gateway.strategies().await.expect("strategies");
    let served: Vec<&str> = catalog.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(served, Catalogue::new().ids(), "every strategy is raced");
    for (i, entry) in catalog.iter().enumerate() {
        let id = 1100 + i as i64;
        // 20 ms of work inside the section: the same buyer's requests
        // overlap there, where a check-then-record limit would let them
        // all through.
        gateway
            .reset(
                id,
                &json!({"stock": STOCK, "strategy": entry.id, "per_user_limit": LIMIT, "work_ms": 20}),
            )
            .await
            .expect("reset");
        let results = join_all((0..REQUESTS).map(|_| gateway.buy(id, "greedy"))).await;
        let count = |code: &str| {
            results
                .iter()
                .filter(|r| matches!(r, BuyResult::Failed(c) if c == code))
                .count() as i64
        };
        let ok = results.iter().filter(|r| **r == BuyResult::Ok).count() as i64;
        let (limited, busy) = (count("limit_reached"), count("busy"));
        let what = format!("{}: {results:?}", entry.id);
        assert_eq!(ok + limited + busy, REQUESTS as i64, "{what}");
        assert!(ok <= LIMIT, "{what}");
        assert!(limited >= REQUESTS as i64 - LIMIT - busy, "{what}");
        if busy == 0 {
            assert_eq!(ok, LIMIT, "{what}");
        }
        // The limit is per buyer: somebody else still buys.
        assert_eq!(gateway.buy(id, "patient").await, BuyResult::Ok, "{what}");
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(ledger.sold, ok + 1, "orders != 200s: {what}");
        if entry.safe {
            // Every refusal after the read left the stock as it was.
            assert_eq!(
                ledger.remaining,
                STOCK - ledger.sold,
                "stock leaked: {what}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_gives_every_buyer_a_fresh_allowance() {
    let gateway = shared().gateway();
    for (id, strategy) in [
        (1130, "redis-lua"),
        (1131, "db-atomic"),
        (1132, "redis-group"),
        (1133, "db-group"),
    ] {
        let body = json!({"stock": 5, "strategy": strategy, "per_user_limit": 1});
        gateway.reset(id, &body).await.expect("reset");
        assert_eq!(gateway.buy(id, "again").await, BuyResult::Ok);
        assert_eq!(
            gateway.buy(id, "again").await,
            BuyResult::Failed("limit_reached".into())
        );
        gateway.reset(id, &body).await.expect("reset");
        assert_eq!(gateway.buy(id, "again").await, BuyResult::Ok, "{strategy}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_at_the_limit_is_refused_without_queueing_for_the_lock() {
    let gateway = shared().gateway();
    for (id, strategy) in [(1140, "redis-lock"), (1141, "db-pessimistic")] {
        // 1.5 s inside the lock (or the row lock): long enough that a
        // refusal arriving while bob holds it cannot have waited its turn.
        let body = json!({"stock": 5, "strategy": strategy, "per_user_limit": 1, "work_ms": 1500});
        gateway.reset(id, &body).await.expect("reset");
        assert_eq!(gateway.buy(id, "alice").await, BuyResult::Ok);
        let bob = tokio::spawn({
            let gateway = gateway.clone();
            async move { gateway.buy(id, "bob").await }
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            gateway.buy(id, "alice").await,
            BuyResult::Failed("limit_reached".into()),
            "{strategy}"
        );
        assert!(
            !bob.is_finished(),
            "{strategy}: alice was refused only after bob's turn"
        );
        assert_eq!(bob.await.expect("bob"), BuyResult::Ok);
    }
}

/// `segmented` claims each buyer's unit at the product's home before it
/// tries a segment, and gives it back when nothing sold: a buyer refused
/// leaves no count behind. (Each left a field at 0 before, so a flood of
/// fresh buyer ids on a sold-out product grew Redis without bound.) With
/// 50 ms in each segment's section, all 40 buyers claim before the 4
/// units are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_buyers_leave_no_count_behind() {
    let lab = shared();
    let gateway = lab.gateway();
    let id = 1150;
    let body = json!({"stock": 4, "strategy": "segmented", "segments": 4,
                      "per_user_limit": 1, "work_ms": 50});
    gateway.reset(id, &body).await.expect("reset");
    let buyers: Vec<String> = (0..40).map(|n| format!("counted-{n}")).collect();
    let results = join_all(buyers.iter().map(|b| gateway.buy(id, b))).await;
    let sold = results.iter().filter(|r| **r == BuyResult::Ok).count();
    assert!(sold <= 4, "{results:?}");
    let redis = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
    let mut conn = redis
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let counted: usize =
        redis::AsyncCommands::hlen(&mut conn, seckill::model::product::keys::buyers(id))
            .await
            .expect("hlen");
    assert_eq!(counted, sold, "{results:?}");
}
