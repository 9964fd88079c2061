//! The `mysql` store: the lab's own MariaDB (InnoDB). Every strategy the
//! catalogue lets sell from MySQL is raced there and held to the same
//! rules as anywhere else, with its orders checked in MySQL's `orders`.

use futures::future::join_all;
use seckill::lab::client::BuyResult;
use seckill::model::product::StoreKind;
use seckill::stock::strategy::Catalogue;
use serde_json::json;
use sqlx::Connection;

use crate::harness::{Race, come_back, race_on, shared};

/// Every safe strategy that takes `store: mysql` sells exactly the stock
/// there, through both instances, and its history checks against MySQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_safe_strategy_that_takes_mysql_sells_exactly_the_stock_there() {
    let lab = shared();
    let gateway = lab.gateway();
    let on_mysql: Vec<_> = Catalogue::new()
        .infos()
        .into_iter()
        .filter(|i| i.safe && i.stores.contains(&StoreKind::Mysql))
        .collect();
    assert!(
        on_mysql.iter().any(|i| i.id == "db-atomic"),
        "the database strategies run on MySQL"
    );
    for (i, info) in on_mysql.iter().enumerate() {
        let product = 2001 + i as i64;
        let settings = json!({"store": "mysql", "max_retries": 1000});
        let row = race_on(
            &lab.audit(),
            &gateway,
            Race::crowd(product, info.id, settings),
        )
        .await;
        assert!(row.sold <= 20 && row.oversold == 0, "{row:?}");
        // Buyers turned away `busy` come back one at a time.
        let sold = row.sold + come_back(&gateway, product, 100).await;
        let ledger = gateway.ledger(product).await.expect("ledger");
        assert_eq!(
            (ledger.sold, sold, ledger.oversold, ledger.remaining),
            (20, 20, 0, 0),
            "{}@mysql: {row:?} then {ledger:?}",
            info.id
        );
        assert_eq!(row.history_ok, Some(true), "{}@mysql: {row:?}", info.id);
    }
}

/// One buyer's concurrent requests get at most the limit on MySQL too,
/// under each database strategy, and a refusal leaks no stock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_buyer_limit_holds_on_mysql() {
    let lab = shared();
    let gateway = lab.gateway();
    for (i, strategy) in [
        "db-atomic",
        "db-pessimistic",
        "db-optimistic",
        "db-lock-table",
    ]
    .into_iter()
    .enumerate()
    {
        let id = 2031 + i as i64;
        let body = json!({"stock": 10, "strategy": strategy, "store": "mysql",
                          "per_user_limit": 2, "max_retries": 1000});
        gateway.reset(id, &body).await.expect("reset");
        let results = join_all((0..12).map(|_| gateway.buy(id, "greedy"))).await;
        let ok = results.iter().filter(|r| **r == BuyResult::Ok).count() as i64;
        assert_eq!(ok, 2, "{strategy}: {results:?}");
        assert_eq!(
            gateway.buy(id, "patient").await,
            BuyResult::Ok,
            "{strategy}"
        );
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (ledger.sold, ledger.remaining),
            (3, 7),
            "{strategy}: {ledger:?}"
        );
    }
}

/// A reset moves a product's orders and stock with it: reset onto
/// PostgreSQL, nothing of its MySQL sale is left there or counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_product_that_leaves_mysql_leaves_nothing_there() {
    let lab = shared();
    let gateway = lab.gateway();
    let id = 2041;
    let on_mysql = json!({"stock": 3, "strategy": "db-atomic", "store": "mysql"});
    gateway.reset(id, &on_mysql).await.expect("reset");
    assert_eq!(gateway.buy(id, "first").await, BuyResult::Ok);
    let mut mysql = sqlx::MySqlConnection::connect(&lab.info.mysql_url)
        .await
        .expect("mysql");
    let count = async |mysql: &mut sqlx::MySqlConnection, sql| -> i64 {
        sqlx::query_scalar(sql)
            .bind(id)
            .fetch_one(mysql)
            .await
            .expect("count")
    };
    let orders = "SELECT count(*) FROM orders WHERE product_id = ?";
    let rows = "SELECT count(*) FROM products WHERE id = ?";
    assert_eq!(count(&mut mysql, orders).await, 1);
    gateway
        .reset(id, &json!({"stock": 3, "strategy": "db-atomic"}))
        .await
        .expect("reset");
    assert_eq!(count(&mut mysql, orders).await, 0, "its MySQL orders went");
    assert_eq!(count(&mut mysql, rows).await, 0, "its MySQL row went");
    assert_eq!(gateway.buy(id, "second").await, BuyResult::Ok);
    let ledger = gateway.ledger(id).await.expect("ledger");
    assert_eq!((ledger.sold, ledger.remaining), (1, 2), "{ledger:?}");
}

/// A strategy that cannot sell from MySQL refuses the store with a 400
/// that names the stores it takes.
#[tokio::test]
async fn a_store_a_strategy_cannot_sell_from_is_refused() {
    let lab = shared();
    let body = json!({"stock": 1, "strategy": "redis-lua", "store": "mysql"});
    let error = lab.gateway().reset(2042, &body).await.expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("400") && text.contains("redis"), "{text}");
}
