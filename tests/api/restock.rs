//! `POST /admin/products/{id}/restock`: units added to a live sale without
//! a reset — every instance's sold-out flag cleared before it answers, an
//! addition id added once per reset, and every bad request refused with
//! nothing added.

use reqwest::StatusCode;
use seckill::lab::client::BuyResult;
use serde_json::json;
use uuid::Uuid;

use crate::harness::{http, shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addition_clears_every_flag_and_is_added_once_per_reset() {
    let lab = shared();
    let (a, b) = (lab.instance(0), lab.instance(1));
    let sold_out = BuyResult::Failed("sold_out".into());
    let reset = json!({"stock": 1, "strategy": "redis-lua"});
    lab.gateway().reset(811, &reset).await.expect("reset");
    assert_eq!(a.buy(811, "first").await, BuyResult::Ok);
    assert_eq!(a.buy(811, "late-a").await, sold_out);
    assert_eq!(b.buy(811, "late-b").await, sold_out);
    // Both instances are flagged; an addition through one reaches both
    // before it answers.
    let id = Uuid::now_v7();
    let added = a.restock_answer(811, 2, id).await.expect("restock");
    assert!(!added.replayed, "{added:?}");
    let again = b.restock_answer(811, 2, id).await.expect("retry");
    assert!(again.replayed, "the retry added again: {again:?}");
    assert_eq!(
        b.buy(811, "again-b").await,
        BuyResult::Ok,
        "b still refused"
    );
    assert_eq!(
        a.buy(811, "again-a").await,
        BuyResult::Ok,
        "a still refused"
    );
    assert_eq!(a.buy(811, "one-too-many").await, sold_out);
    let ledger = lab.gateway().ledger(811).await.expect("ledger");
    assert_eq!(
        (ledger.initial, ledger.added, ledger.sold, ledger.oversold),
        (3, 2, 3, 0),
        "{ledger:?}"
    );
    // A reset starts over: the same id is a new addition there.
    lab.gateway().reset(811, &reset).await.expect("reset");
    let after = a.restock_answer(811, 2, id).await.expect("restock");
    assert!(!after.replayed, "{after:?}");
    assert_eq!(lab.gateway().ledger(811).await.expect("ledger").initial, 3);
}

#[tokio::test]
async fn bad_restocks_are_refused_and_add_nothing() {
    let lab = shared();
    let gateway = lab.gateway();
    gateway
        .reset(812, &json!({"stock": 4, "strategy": "db-atomic"}))
        .await
        .expect("reset");
    let url = |id: i64| format!("{}/admin/products/{id}/restock", lab.info.gateway_url);
    let send = |id: i64, token: Option<&str>, body: &str| {
        let mut request = http()
            .post(url(id))
            .header("content-type", "application/json")
            .body(body.to_owned());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.expect("request");
            let status = response.status();
            let body: serde_json::Value = response.json().await.expect("a JSON body");
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
            )
        }
    };
    let token = lab.info.admin_token.as_str();
    let refused = [
        (
            send(812, None, r#"{"units": 1}"#).await,
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            send(812, Some("not-the-token"), r#"{"units": 1}"#).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            send(812, Some(token), r#"{"units": 0}"#).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(812, Some(token), r#"{"units": -3}"#).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(812, Some(token), r#"{"units": 1.5}"#).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(812, Some(token), r#"{"units": 1, "stock": 9}"#).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(812, Some(token), r#"{"units": 1, "addition_id": "nope"}"#).await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(812, Some(token), "").await,
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            send(990_812, Some(token), r#"{"units": 1}"#).await,
            StatusCode::NOT_FOUND,
            "unknown_product",
        ),
    ];
    for (i, ((status, code), want, want_code)) in refused.into_iter().enumerate() {
        assert_eq!((status, code.as_str()), (want, want_code), "case {i}");
    }
    let ledger = gateway.ledger(812).await.expect("ledger");
    assert_eq!(
        (ledger.initial, ledger.added, ledger.remaining),
        (4, 0, 4),
        "{ledger:?}"
    );
}

/// An addition waits for the product's lock as a buyer does, no longer
/// than `acquire_timeout_ms`: held by a buyer's critical section, it is
/// refused `busy` with nothing added, and the same id adds once the lock
/// is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_addition_that_cannot_take_the_lock_is_busy_and_adds_nothing() {
    let lab = shared();
    let gateway = lab.gateway();
    let settings =
        json!({"stock": 5, "strategy": "redis-lock", "work_ms": 1000, "acquire_timeout_ms": 0});
    gateway.reset(813, &settings).await.expect("reset");
    let holder = tokio::spawn({
        let instance = lab.instance(0);
        async move { instance.buy(813, "holder").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let id = Uuid::now_v7();
    let refused = gateway.restock(813, 3, id).await;
    assert_eq!(
        (refused.status, refused.code.as_deref()),
        (503, Some("busy")),
        "{refused:?}"
    );
    assert_eq!(holder.await.expect("holder"), BuyResult::Ok);
    let ledger = gateway.ledger(813).await.expect("ledger");
    assert_eq!((ledger.initial, ledger.added), (5, 0), "{ledger:?}");
    let added = gateway.restock_answer(813, 3, id).await.expect("restock");
    assert!(!added.replayed, "{added:?}");
    let ledger = gateway.ledger(813).await.expect("ledger");
    assert_eq!(
        (ledger.initial, ledger.added, ledger.remaining),
        (8, 3, 7),
        "{ledger:?}"
    );
}
