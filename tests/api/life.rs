//! An order's life after the sale (`pay_within_ms`): a 200 is a hold that
//! its buyer alone can pay or cancel; an unpaid hold's unit goes back on
//! sale and sells again, under every store; a payment after the expiry is
//! 409 `expired`; and the naive give-back oversells where the state
//! machine does not, made deterministic by `reaper_pause_ms`.

use std::time::Duration;

use serde_json::{Value, json};
use uuid::Uuid;

use crate::harness::{http, raw_buy, shared};

/// `verb` on `/orders/{order}` (`""`, `/pay` or `/cancel`) as `user`:
/// status and body.
async fn order(base: &str, action: &str, order: &str, user: &str) -> (u16, Value) {
    let url = format!("{base}/orders/{order}{action}");
    let request = if action.is_empty() {
        http().get(url)
    } else {
        http().post(url)
    };
    let response = request
        .header("X-User-Id", user)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// Buys one unit as `user` and returns the hold's order id.
async fn hold(base: &str, id: i64, user: &str) -> String {
    let (status, _, body) = raw_buy(base, id, user, None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "held", "{body}");
    assert!(body["pay_by_ms"].as_u64().is_some(), "{body}");
    body["order_id"].as_str().expect("an order id").to_owned()
}

/// Buys one unit as `user` once the unit that went back is on sale
/// everywhere: an instance that saw the product sold out forgets its flag
/// when the put-back's message reaches it (milliseconds), so a buy may be
/// told `sold_out` until then; within two seconds it must sell.
async fn hold_again(base: &str, id: i64, user: &str) -> String {
    for _ in 0..40 {
        let (status, _, body) = raw_buy(base, id, user, None).await;
        if status == 409 && body["error"]["code"] == "sold_out" {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(status, 200, "{body}");
        return body["order_id"].as_str().expect("an order id").to_owned();
    }
    panic!("product {id}: the unit given back never sold again");
}

/// Waits until product `id`'s counter holds at least `units` again (the
/// reaper put them back), for at most 10 s.
async fn until_remaining(id: i64, units: i64) {
    let gateway = shared().gateway();
    for _ in 0..100 {
        if gateway.ledger(id).await.expect("ledger").remaining >= units {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("product {id} never got back to {units} units on sale");
}

/// The products of these tests: one per store and kind of strategy.
const SELLERS: [(i64, &str, Option<&str>); 6] = [
    (2401, "redis-lua", None),
    (2402, "db-atomic", None),
    (2403, "db-atomic", Some("mysql")),
    (2404, "redis-lock", None),
    (2405, "segmented", None),
    (2406, "redlock", Some("postgres")),
];

fn reset_body(strategy: &str, store: Option<&str>, extra: Value) -> Value {
    let mut body = json!({"stock": 1, "strategy": strategy});
    if let Some(store) = store {
        body["store"] = json!(store);
    }
    if strategy == "segmented" {
        body["segments"] = json!(1);
    }
    for (key, value) in extra.as_object().expect("an object") {
        body[key] = value.clone();
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_is_paid_by_its_buyer_alone() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    for (id, strategy, store) in SELLERS {
        let body = reset_body(strategy, store, json!({"pay_within_ms": 60_000}));
        gateway.reset(id, &body).await.expect("reset");
        let order_id = hold(base, id, "alice").await;
        let (status, _, body) = raw_buy(base, id, "bob", None).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("sold_out")),
            "{strategy}: {body}"
        );
        for action in ["", "/pay", "/cancel"] {
            let (status, body) = order(base, action, &order_id, "bob").await;
            assert_eq!(status, 403, "{strategy} {action}: {body}");
            assert_eq!(body["error"]["code"], "not_your_order");
        }
        let (status, body) = order(base, "", &order_id, "alice").await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("held")),
            "{strategy}: {body}"
        );
        for _ in 0..2 {
            let (status, body) = order(base, "/pay", &order_id, "alice").await;
            assert_eq!(
                (status, &body["status"]),
                (200, &json!("paid")),
                "{strategy}: {body}"
            );
        }
        let (status, body) = order(base, "/cancel", &order_id, "alice").await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("not_held")),
            "{body}"
        );
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (
                ledger.sold,
                ledger.held,
                ledger.paid,
                ledger.oversold,
                ledger.remaining
            ),
            (1, 0, 1, 0, 0),
            "{strategy}: {ledger:?}"
        );
    }
    let (status, body) = order(base, "", &Uuid::new_v4().to_string(), "alice").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (404, &json!("unknown_order"))
    );
    let (status, body) = order(base, "/pay", "not-a-uuid", "alice").await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("bad_request"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpaid_hold_goes_back_on_sale_and_sells_again() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    for (id, strategy, store) in SELLERS {
        let id = id + 10;
        let body = reset_body(strategy, store, json!({"pay_within_ms": 700}));
        gateway.reset(id, &body).await.expect("reset");
        let order_id = hold(base, id, "alice").await;
        // Seen sold out: the instances flag it, and the give-back must
        // clear the flags for the unit to sell again.
        for buyer in ["carol", "dave"] {
            let (status, _, body) = raw_buy(base, id, buyer, None).await;
            assert_eq!(status, 409, "{strategy}: {body}");
        }
        until_remaining(id, 1).await;
        let (status, body) = order(base, "/pay", &order_id, "alice").await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("expired")),
            "{strategy}: {body}"
        );
        let (status, body) = order(base, "", &order_id, "alice").await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("expired")),
            "{body}"
        );
        hold_again(base, id, "bob").await;
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (
                ledger.sold,
                ledger.held,
                ledger.paid,
                ledger.expired,
                ledger.returned
            ),
            (2, 1, 0, 1, 1),
            "{strategy}: {ledger:?}"
        );
        assert_eq!(
            (ledger.oversold, ledger.stranded, ledger.remaining),
            (0, 0, 0),
            "{ledger:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_hold_frees_the_unit_and_the_buyers_limit_at_once() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    for (id, strategy, store) in SELLERS {
        let id = id + 20;
        let body = reset_body(
            strategy,
            store,
            json!({"pay_within_ms": 60_000, "per_user_limit": 1, "stock": 2}),
        );
        gateway.reset(id, &body).await.expect("reset");
        let order_id = hold(base, id, "alice").await;
        let (status, _, body) = raw_buy(base, id, "alice", None).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (409, &json!("limit_reached")),
            "{strategy}"
        );
        let (status, body) = order(base, "/cancel", &order_id, "alice").await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("expired")),
            "{strategy}: {body}"
        );
        let (status, body) = order(base, "/cancel", &order_id, "alice").await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("expired")),
            "{body}"
        );
        assert_eq!(
            gateway.ledger(id).await.expect("ledger").remaining,
            2,
            "{strategy}"
        );
        hold(base, id, "alice").await;
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (ledger.held, ledger.returned, ledger.remaining),
            (1, 1, 1),
            "{ledger:?}"
        );
    }
}

/// A buyer who hangs up while its cancel runs (the give-back's pause made
/// 3 s long, the client gone after 1 s) still has its cancel: the order
/// ends expired and given back, the unit is on sale again and the next
/// buyer buys it, under both mechanisms that take cancels by state. (The
/// cancel used to run in the request's future, which the server drops
/// when its client goes: the mark was written, the put-back never ran, and
/// the state machine's reaper looked only at held orders.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_whose_buyer_hangs_up_still_gives_the_unit_back() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    for (id, giveback) in [(2451, "state-machine"), (2452, "delay-queue")] {
        let body = reset_body(
            "redis-lua",
            None,
            json!({"pay_within_ms": 60_000, "giveback": giveback, "reaper_pause_ms": 3_000}),
        );
        gateway.reset(id, &body).await.expect("reset");
        let order_id = hold(base, id, "hangs-up").await;
        let hung = http()
            .post(format!("{base}/orders/{order_id}/cancel"))
            .header("X-User-Id", "hangs-up")
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        assert!(
            hung.as_ref().is_err_and(|e| e.is_timeout()),
            "{giveback}: the cancel must still be running after 1 s: {hung:?}"
        );
        until_remaining(id, 1).await;
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (
                ledger.held,
                ledger.returned,
                ledger.stranded,
                ledger.remaining
            ),
            (0, 1, 0, 1),
            "{giveback}: {ledger:?}"
        );
        let (status, body) = order(base, "", &order_id, "hangs-up").await;
        assert_eq!(
            (status, &body["status"]),
            (200, &json!("expired")),
            "{body}"
        );
        hold_again(base, id, "after-the-hang-up").await;
    }
}

/// A payment lands inside the give-back's pause (made 2 s long): the naive
/// job has put the unit back and marks the hold expired after the
/// payment, so the unit is paid for and sold again (both instances' jobs
/// may put it back, one unit each: that is the naive job too); the state
/// machine expired the hold before its pause, so the payment is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_payment_oversells_under_the_naive_job_only() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    for (id, giveback, oversold) in [(2431, "naive-cron", 1), (2432, "state-machine", 0)] {
        let body = json!({"stock": 1, "strategy": "db-atomic", "pay_within_ms": 300,
                          "giveback": giveback, "reaper_pause_ms": 2_000});
        gateway.reset(id, &body).await.expect("reset");
        let order_id = hold(base, id, "alice").await;
        // Overdue, and inside the reaper's pause (it ticks every 200 ms).
        tokio::time::sleep(Duration::from_millis(800)).await;
        let (status, body) = order(base, "/pay", &order_id, "alice").await;
        let paid = status == 200;
        assert_eq!(
            paid,
            giveback == "naive-cron",
            "{giveback}: {status} {body}"
        );
        if !paid {
            assert_eq!(body["error"]["code"], "expired", "{body}");
        }
        until_remaining(id, 1).await;
        hold_again(base, id, "bob").await;
        // The naive job's mark lands after its pause.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(ledger.oversold, oversold, "{giveback}: {ledger:?}");
        assert_eq!(ledger.paid_and_returned, oversold, "{giveback}: {ledger:?}");
    }
}

/// Reconciles `id` (`repair` or not) through the gateway.
async fn reconcile(id: i64, repair: bool) -> seckill::orders::life::reconcile::Drift {
    let gateway = shared().gateway();
    let mut drifts = gateway
        .reconcile(repair, Some(id))
        .await
        .expect("reconcile");
    assert_eq!(drifts.len(), 1, "{drifts:?}");
    drifts.pop().expect("one product")
}

/// A counter set wrong behind the service's back (too high on Redis, too
/// low in PostgreSQL), and an expired hold whose unit is not back:
/// reconciliation finds each, and its repair leaves no drift and
/// sells nothing that is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_finds_and_repairs_every_drift() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), &lab.info.gateway_url);
    gateway
        .reset(2441, &json!({"stock": 5, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    gateway
        .reset(2442, &json!({"stock": 5, "strategy": "db-atomic"}))
        .await
        .expect("reset");
    for (id, buyer) in [(2441, "a"), (2441, "b"), (2442, "a")] {
        let (status, _, body) = raw_buy(base, id, buyer, None).await;
        assert_eq!(status, 200, "{body}");
    }
    let redis = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
    let mut conn = redis
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let key = seckill::model::product::keys::stock(2441);
    let _: () = redis::AsyncCommands::set(&mut conn, key, 9)
        .await
        .expect("set");
    let pg = sqlx::PgPool::connect(&lab.info.postgres_url)
        .await
        .expect("pg");
    sqlx::query("UPDATE products SET stock = 1 WHERE id = 2442")
        .execute(&pg)
        .await
        .expect("update");

    let found = reconcile(2441, false).await;
    assert_eq!(
        (found.remaining, found.truth, found.drift),
        (9, 3, 6),
        "{found:?}"
    );
    let found = reconcile(2442, false).await;
    assert_eq!(
        (found.remaining, found.truth, found.drift),
        (1, 4, -3),
        "{found:?}"
    );
    for (id, truth) in [(2441, 3), (2442, 4)] {
        let repaired = reconcile(id, true).await;
        assert!(repaired.repaired, "{repaired:?}");
        assert_eq!(repaired.drift_after, Some(0), "{repaired:?}");
        assert_eq!(gateway.ledger(id).await.expect("ledger").remaining, truth);
    }

    // A hold expired and its unit not back (staged by hand), under the
    // naive job, whose reaper looks only at held orders: the state
    // machine's and the delay queue's next pass would finish it itself.
    let body = json!({"stock": 2, "strategy": "db-atomic", "pay_within_ms": 60_000,
                      "giveback": "naive-cron"});
    gateway.reset(2443, &body).await.expect("reset");
    let stranded = hold(base, 2443, "alice").await;
    hold(base, 2443, "bob").await;
    sqlx::query("UPDATE orders SET state = 'expired' WHERE order_id = $1")
        .bind(stranded.parse::<Uuid>().expect("a uuid"))
        .execute(&pg)
        .await
        .expect("update");
    let found = reconcile(2443, false).await;
    assert_eq!(
        (found.remaining, found.owed, found.kept),
        (0, 1, 1),
        "{found:?}"
    );
    assert_eq!(gateway.ledger(2443).await.expect("ledger").stranded, 1);
    let repaired = reconcile(2443, true).await;
    assert_eq!((repaired.put_back, repaired.drift), (1, 0), "{repaired:?}");
    let ledger = gateway.ledger(2443).await.expect("ledger");
    assert_eq!(
        (ledger.remaining, ledger.held, ledger.stranded),
        (1, 1, 0),
        "{ledger:?}"
    );
    // Once: a second repair puts nothing back.
    assert_eq!(reconcile(2443, true).await.put_back, 0);
    pg.close().await;
}

/// Takes one unit off product `id`'s stock behind the service's back,
/// where `store` keeps it: a stranded unit, so a repair has a drift to set.
async fn strand_one(id: i64, strategy: &str, store: Option<&str>) {
    let lab = shared();
    match (strategy, store) {
        (_, Some("mysql")) => {
            let mysql = sqlx::MySqlPool::connect(&lab.info.mysql_url)
                .await
                .expect("mysql");
            sqlx::query("UPDATE products SET stock = stock - 1 WHERE id = ?")
                .bind(id)
                .execute(&mysql)
                .await
                .expect("update");
            mysql.close().await;
        }
        (s, _) if s.starts_with("db-") => {
            let pg = sqlx::PgPool::connect(&lab.info.postgres_url)
                .await
                .expect("pg");
            sqlx::query("UPDATE products SET stock = stock - 1 WHERE id = $1")
                .bind(id)
                .execute(&pg)
                .await
                .expect("update");
            pg.close().await;
        }
        _ => {
            let redis = redis::Client::open(lab.info.redis_url.as_str()).expect("redis");
            let mut conn = redis
                .get_multiplexed_async_connection()
                .await
                .expect("redis");
            let key = seckill::model::product::keys::stock(id);
            let _: i64 = redis::AsyncCommands::decr(&mut conn, key, 1)
                .await
                .expect("decr");
        }
    }
}

/// Reconciliation's repair under live traffic, staged with
/// `repair_pause_ms` (1 s after it reads the stock, 1 s after it counts
/// the orders): a cancel puts a unit back in the first gap and a sale
/// takes one in the second. The stock's value is then what the repair
/// read and the truth one unit below what it counted; a compare-and-set
/// on the value set the counter one too high and a fourth unit of three
/// sold. On every store, the repair must set what is true then: bob's
/// hold and two more, no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_between_a_give_back_and_a_sale_sells_nothing_held() {
    let lab = shared();
    let (gateway, base) = (&lab.gateway(), lab.info.gateway_url.as_str());
    let stages = [
        (2471, "redis-lua", None),
        (2472, "db-atomic", None),
        (2473, "db-atomic", Some("mysql")),
        (2474, "redis-lock", None),
    ]
    .map(|(id, strategy, store)| async move {
        let mut body = reset_body(
            strategy,
            store,
            json!({"pay_within_ms": 60_000, "giveback": "state-machine",
                   "repair_pause_ms": 1_000}),
        );
        body["stock"] = json!(3);
        gateway.reset(id, &body).await.expect("reset");
        let alices = hold(base, id, "alice").await;
        strand_one(id, strategy, store).await;
        let repair = tokio::spawn(reconcile(id, true));
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (status, body) = order(base, "/cancel", &alices, "alice").await;
        assert_eq!(status, 200, "{strategy}: {body}");
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        hold(base, id, "bob").await;
        let repaired = repair.await.expect("the repair");
        assert!(repaired.repaired, "{strategy}: {repaired:?}");
        let mut more = 0;
        for buyer in ["carol", "dave", "erin", "frank"] {
            let (status, _, body) = raw_buy(base, id, buyer, None).await;
            match status {
                200 => more += 1,
                409 => assert_eq!(body["error"]["code"], "sold_out", "{body}"),
                _ => panic!("{strategy}: {status} {body}"),
            }
        }
        let ledger = gateway.ledger(id).await.expect("ledger");
        assert_eq!(
            (more, ledger.held + ledger.paid, ledger.oversold),
            (2, 3, 0),
            "{strategy} ({store:?}): {repaired:?} {ledger:?}"
        );
    });
    futures::future::join_all(stages).await;
}

/// An operator whose `reconcile --repair` hangs up (a closed terminal, a
/// proxy's timeout) while the repair waits in its `repair_pause_ms` gaps:
/// the repair runs to its end all the same, and the stranded unit is back
/// on sale. (In the request's own future it was dropped with the
/// connection, leaving the drift.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repair_whose_caller_hangs_up_still_repairs() {
    let lab = shared();
    let (gateway, base) = (lab.gateway(), lab.info.gateway_url.as_str());
    let id = 2475;
    let mut body = reset_body("redis-lua", None, json!({"repair_pause_ms": 1_500}));
    body["stock"] = json!(5);
    gateway.reset(id, &body).await.expect("reset");
    let (status, _, sold) = raw_buy(base, id, "before-the-repair", None).await;
    assert_eq!(status, 200, "{sold}");
    strand_one(id, "redis-lua", None).await;
    let hung = http()
        .post(format!("{base}/admin/reconcile?repair=true&product={id}"))
        .bearer_auth(&lab.info.admin_token)
        .timeout(Duration::from_secs(1))
        .send()
        .await;
    assert!(
        hung.as_ref().is_err_and(|e| e.is_timeout()),
        "the repair must still be running after 1 s: {hung:?}"
    );
    until_remaining(id, 4).await;
    let ledger = gateway.ledger(id).await.expect("ledger");
    assert_eq!((ledger.remaining, ledger.stranded), (4, 0), "{ledger:?}");
}

/// A race of holders who pay, cancel or walk away (the payer model of
/// `seckill race --pay-ratio`), on every seller: the history holds every
/// kind of step, and the check — paid + held within the stock at every
/// instant, every pay 200 a paid order — passes, here and from the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_race_of_payers_stays_within_the_stock_at_every_instant() {
    use seckill::race::driver::{RaceSpec, race};
    use seckill::race::payer::{DelayMs, Payer};

    let lab = shared();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("history.jsonl");
    let audit = seckill::race::driver::Audit {
        history: Some(file.clone()),
        ..lab.audit()
    };
    for (id, strategy, store) in SELLERS {
        let mut settings = reset_body(strategy, store, json!({"pay_within_ms": 300}));
        let body = settings.as_object_mut().expect("an object");
        body.remove("stock");
        body.remove("strategy");
        let spec = RaceSpec {
            product_id: id + 60,
            strategy: strategy.into(),
            stock: 5,
            buyers: 40,
            concurrency: 10,
            // Arrivals over 1.2 s: units given back sell again.
            pace: Some(Duration::from_millis(30)),
            settings: serde_json::from_value(settings).expect("settings"),
            reserving: 0,
            payer: Some(Payer {
                pay_ratio: 0.4,
                cancel_ratio: 0.3,
                delay: DelayMs {
                    least: 0,
                    most: 400,
                },
            }),
        };
        let row = race(&lab.gateway(), &spec, &audit).await.expect("race");
        let life = row.life.clone().expect("the order-life columns");
        assert_eq!(row.history_ok, Some(true), "{strategy}: {row:?}");
        assert_eq!(life.paid as u64, life.pays_ok, "{strategy}: {row:?}");
        assert!(life.paid + life.held <= 5, "{strategy}: {row:?}");
        assert_eq!((life.stranded, life.paid_and_returned), (0, 0), "{row:?}");
        assert_eq!(life.giveback_unseen, 0, "{strategy}: {row:?}");
    }
    let text = std::fs::read_to_string(&file).expect("history");
    for op in ["\"op\":\"pay\"", "\"op\":\"cancel\"", "\"op\":\"expire\""] {
        assert!(text.contains(op), "no {op} in the history");
    }
    // Every 200 says where it ran, and a hold's says when it falls due:
    // an outside checker needs neither the order id's clock nor guesses.
    for line in text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
    {
        if line["status"] != 200 || line["op"] == "expire" {
            continue;
        }
        assert!(line["served_by"].is_string(), "{line}");
        if line.get("op").is_none() {
            assert!(line["pay_by_ms"].as_u64().is_some(), "{line}");
        }
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .arg("check")
        .arg(&file)
        .args(["--database-url", &lab.info.postgres_url])
        .args(["--mysql-url", &lab.info.mysql_url])
        .output()
        .expect("running seckill check");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
}
