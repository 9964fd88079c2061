//! Pre-booking: buyers reserve before the opening; from the opening only
//! a reservation's own buyer can buy with it, on the reset it was made
//! for. A forged, lent or stale token is 403 `not_reserved`, nothing sold.

use std::time::Duration;

use seckill::model::product::now_ms;

use serde_json::{Value, json};

use crate::harness::{http, raw_buy, shared};

/// `POST /stock/{id}/reserve` as `user`: status and body.
async fn reserve(base: &str, id: i64, user: &str) -> (u16, Value) {
    let response = http()
        .post(format!("{base}/stock/{id}/reserve"))
        .header("X-User-Id", user)
        .send()
        .await
        .expect("an answer");
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON"))
}

/// A buy as `user`, with `token` as its reservation when given: status
/// and the error code (none for a 200).
async fn buy(base: &str, id: i64, user: &str, token: Option<&str>) -> (u16, Option<String>) {
    let (status, _, body) = raw_buy(base, id, user, token).await;
    (status, body["error"]["code"].as_str().map(str::to_owned))
}

fn token(body: &Value) -> String {
    body["token"].as_str().expect("a token").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_reservations_own_buyer_buys_with_it() {
    let lab = shared();
    let gateway = lab.gateway();
    let base = &lab.info.gateway_url;

    // Pre-booking needs an opening to reserve before.
    let refused = gateway
        .reset(
            1905,
            &json!({"stock": 1, "strategy": "redis-lua", "prebooking": true}),
        )
        .await;
    assert!(refused.is_err_and(|e| e.to_string().contains("400")));

    let opens = now_ms() + 1_500;
    let body =
        json!({"stock": 2, "strategy": "redis-lua", "opens_at_ms": opens, "prebooking": true});
    gateway.reset(1905, &body).await.expect("reset");
    let (status, alice) = reserve(base, 1905, "alice").await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(alice["user"], "alice");
    let alice = token(&alice);
    let (_, again) = reserve(base, 1905, "alice").await;
    assert_eq!(token(&again), alice, "asking again gives the same token");
    let (_, bob) = reserve(base, 1905, "bob").await;
    let bob = token(&bob);
    // Early, even with a reservation.
    assert_eq!(
        buy(base, 1905, "alice", Some(&alice)).await,
        (403, Some("not_started".into()))
    );

    tokio::time::sleep(Duration::from_millis(opens.saturating_sub(now_ms()) + 100)).await;
    let not_reserved = (403, Some("not_reserved".to_owned()));
    assert_eq!(
        buy(base, 1905, "carol", None).await,
        not_reserved,
        "no token"
    );
    assert_eq!(
        buy(base, 1905, "carol", Some(&alice)).await,
        not_reserved,
        "lent"
    );
    let mut forged = alice.clone();
    forged.replace_range(..2, if alice.starts_with("00") { "11" } else { "00" });
    assert_eq!(
        buy(base, 1905, "alice", Some(&forged)).await,
        not_reserved,
        "forged"
    );
    assert_eq!(
        buy(base, 1905, "alice", Some("x")).await,
        not_reserved,
        "junk"
    );
    let (status, closed) = reserve(base, 1905, "carol").await;
    assert_eq!(
        (status, closed["error"]["code"].as_str()),
        (409, Some("not_reservable")),
        "reservations close at the opening: {closed}"
    );
    let ledger = gateway.ledger(1905).await.expect("ledger");
    assert_eq!(
        (ledger.sold, ledger.remaining),
        (0, 2),
        "refusals sold nothing"
    );

    assert_eq!(buy(base, 1905, "alice", Some(&alice)).await, (200, None));
    assert_eq!(buy(base, 1905, "bob", Some(&bob)).await, (200, None));

    // A reset voids the reservations made before it.
    let body = json!({"stock": 1, "strategy": "redis-lua", "opens_at_ms": now_ms() + 300, "prebooking": true});
    gateway.reset(1905, &body).await.expect("reset");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        buy(base, 1905, "alice", Some(&alice)).await,
        not_reserved,
        "stale"
    );
}

#[tokio::test]
async fn a_product_without_prebooking_takes_no_reservations() {
    let lab = shared();
    let body = json!({"stock": 1, "strategy": "redis-lua", "opens_at_ms": now_ms() + 60_000});
    lab.gateway().reset(1906, &body).await.expect("reset");
    let (status, answer) = reserve(&lab.info.gateway_url, 1906, "alice").await;
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["error"]["code"], "not_reservable");
}

/// A malformed `X-Reservation` is a 400 on any product, one that takes
/// no reservations too (where a good one is ignored), and sells nothing.
#[tokio::test]
async fn a_malformed_reservation_is_refused_on_every_product() {
    let lab = shared();
    let gateway = lab.gateway();
    gateway
        .reset(1913, &json!({"stock": 1, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    let base = &lab.info.gateway_url;
    let long = "x".repeat(129);
    for token in ["", long.as_str()] {
        let (status, _, answer) = raw_buy(base, 1913, "alice", Some(token)).await;
        assert_eq!(status, 400, "{token:?}: {answer}");
        assert_eq!(answer["error"]["code"], "bad_request");
    }
    let (status, _, _) = raw_buy(base, 1913, "alice", Some("ignored")).await;
    assert_eq!(
        status, 200,
        "a well-formed token is ignored without pre-booking"
    );
    assert_eq!(gateway.ledger(1913).await.expect("ledger").sold, 1);
}

/// The race driver with pre-booking: 10 of 30 buyers reserve before the
/// opening; the 20 without a reservation are all turned away, and the
/// stock goes to holders only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_holders_buy_in_a_prebooked_race() {
    use seckill::race::driver::{RaceSpec, race};

    let lab = shared();
    let settings = seckill::model::product::Settings {
        opens_at_ms: now_ms() + 1_000,
        prebooking: true,
        ..Default::default()
    };
    let spec = RaceSpec {
        product_id: 1911,
        strategy: "redis-lua".into(),
        stock: 5,
        buyers: 30,
        concurrency: 30,
        pace: None,
        settings,
        reserving: 10,
        payer: None,
    };
    let row = race(&lab.gateway(), &spec, &lab.audit())
        .await
        .expect("race");
    assert_eq!((row.sold, row.oversold), (5, 0), "{row:?}");
    assert_eq!(row.history_ok, Some(true), "{row:?}");
    assert_eq!(row.errors.get("not_reserved"), Some(&20), "{row:?}");
    assert_eq!(row.errors.get("sold_out"), Some(&5), "{row:?}");
    assert_eq!(
        row.opening.as_ref().map(|o| o.reserved),
        Some(10),
        "{row:?}"
    );
}
