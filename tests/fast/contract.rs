//! The HTTP contract and every strategy's basic sale, through the router
//! in-process. Product ids 20000 and up.

use axum::http::{Method, StatusCode};
use seckill::stock::strategy::Catalogue;
use serde_json::{Value, json};

use crate::app::{app, app_with, buy, call, lab, reset};

#[tokio::test]
async fn every_strategy_sells_its_stock_and_then_refuses() {
    let app = app().await;
    for (i, id) in Catalogue::new().ids().into_iter().enumerate() {
        let product = 20_000 + i as i64;
        reset(&app, product, json!({"stock": 2, "strategy": id})).await;
        for n in 0..2 {
            let sold = buy(&app, product, &format!("fast-{n}")).await;
            assert_eq!(sold.status, StatusCode::OK, "{id}: {}", sold.body);
            assert_eq!(sold.body["strategy"], id);
            assert_eq!(sold.body["served_by"], "in-process");
        }
        let late = buy(&app, product, "fast-late").await;
        assert_eq!(
            (late.status, late.code()),
            (StatusCode::CONFLICT, "sold_out"),
            "{id}"
        );
        let ledger = call(&app, Method::GET, &format!("/stock/{product}"), &[], None).await;
        let counts = (&ledger.body["sold"], &ledger.body["remaining"]);
        assert_eq!(counts, (&json!(2), &json!(0)), "{id}: {}", ledger.body);
    }
}

#[tokio::test]
async fn the_catalogue_route_serves_the_catalogue() {
    let app = app().await;
    let served = call(&app, Method::GET, "/strategies", &[], None).await;
    let built: Value = serde_json::to_value(Catalogue::new().infos()).expect("json");
    assert_eq!(served.body, built);
    // Every entry says what it does under plain contention.
    for entry in built.as_array().expect("array") {
        assert!(entry["under"]["contention"].is_string(), "{entry}");
    }
}

#[tokio::test]
async fn malformed_requests_get_the_contracts_errors_and_sell_nothing() {
    let app = app().await;
    reset(&app, 20_100, json!({"stock": 3, "strategy": "redis-lua"})).await;
    for path in ["/stock/0/buy", "/stock/abc/buy", "/stock/-1/buy"] {
        let answer = call(&app, Method::POST, path, &[("x-user-id", "u")], None).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, "bad_request")
        );
    }
    let no_buyer = call(&app, Method::POST, "/stock/20100/buy", &[], None).await;
    assert_eq!(no_buyer.code(), "bad_request");
    let bad_buyer = buy(&app, 20_100, "a b").await;
    assert_eq!(bad_buyer.code(), "bad_request");
    // A malformed `?user=` is refused beside a good header, not ignored.
    let bad_query_buyer = call(
        &app,
        Method::POST,
        "/stock/20100/buy?user=%2A",
        &[("x-user-id", "u")],
        None,
    )
    .await;
    assert_eq!(bad_query_buyer.code(), "bad_request");
    let bad_key = call(
        &app,
        Method::POST,
        "/stock/20100/buy",
        &[("x-user-id", "u"), ("idempotency-key", "")],
        None,
    )
    .await;
    assert_eq!(bad_key.code(), "bad_request");
    let unknown = buy(&app, 20_199, "u").await;
    assert_eq!(
        (unknown.status, unknown.code()),
        (StatusCode::NOT_FOUND, "unknown_product")
    );
    let nowhere = call(&app, Method::GET, "/nowhere", &[], None).await;
    assert_eq!(nowhere.code(), "not_found");
    let wrong_method = call(&app, Method::DELETE, "/stock/20100/buy", &[], None).await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    let ledger = call(&app, Method::GET, "/stock/20100", &[], None).await;
    assert_eq!(
        (&ledger.body["sold"], &ledger.body["remaining"]),
        (&json!(0), &json!(3))
    );
}

#[tokio::test]
async fn resets_want_the_token_and_valid_settings() {
    let app = app().await;
    let body = json!({"stock": 1, "strategy": "redis-lua"});
    let path = "/admin/products/20200";
    let anonymous = call(&app, Method::PUT, path, &[], Some(body.clone())).await;
    assert_eq!(anonymous.code(), "unauthorized");
    let wrong = call(
        &app,
        Method::PUT,
        path,
        &[("authorization", "Bearer nope")],
        Some(body),
    )
    .await;
    assert_eq!(wrong.code(), "forbidden");
    let token = format!("Bearer {}", lab().info.admin_token);
    let auth = [("authorization", token.as_str())];
    for bad in [
        json!({"stock": 1, "strategy": "no-such-strategy"}),
        json!({"stock": -1, "strategy": "redis-lua"}),
        json!({"stock": 1, "strategy": "redis-lua", "lease_ms": 0}),
        json!({"stock": 1, "strategy": "redis-lua", "segments": 65}),
        json!({"stock": 1, "strategy": "redis-lua", "no_such_knob": 1}),
        json!({"stock": 1.5, "strategy": "redis-lua"}),
    ] {
        let answer = call(&app, Method::PUT, path, &auth, Some(bad.clone())).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{bad}"
        );
    }
    // JSON Schema's integers include 2.0: the document says "integer", so
    // a client writing whole numbers as floats is not refused.
    let floats = json!({"stock": 2.0, "strategy": "redis-lua", "work_ms": 0.0});
    let answer = call(&app, Method::PUT, path, &auth, Some(floats)).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["initial"], 2);
}

#[tokio::test]
async fn a_buyer_gets_the_limit_and_a_retry_gets_its_order_back() {
    let app = app().await;
    reset(
        &app,
        20_300,
        json!({"stock": 5, "strategy": "db-atomic", "per_user_limit": 1}),
    )
    .await;
    assert_eq!(buy(&app, 20_300, "once").await.status, StatusCode::OK);
    assert_eq!(buy(&app, 20_300, "once").await.code(), "limit_reached");

    reset(&app, 20_301, json!({"stock": 5, "strategy": "redis-lua"})).await;
    let headers = [("x-user-id", "retrier"), ("idempotency-key", "k-1")];
    let first = call(&app, Method::POST, "/stock/20301/buy", &headers, None).await;
    let again = call(&app, Method::POST, "/stock/20301/buy", &headers, None).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    assert_eq!(again.body["order_id"], first.body["order_id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let ledger = call(&app, Method::GET, "/stock/20301", &[], None).await;
    assert_eq!(ledger.body["sold"], json!(1));
}

#[tokio::test]
async fn the_openapi_document_is_served_as_built() {
    let app = app().await;
    let answer = call(&app, Method::GET, "/openapi.json", &[], None).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["content-type"], "application/json");
    let built =
        serde_json::to_value(seckill::instance::http::openapi()).expect("the document serializes");
    assert_eq!(answer.body, built);
}

#[tokio::test]
async fn a_buy_that_times_out_is_an_unknown_outcome_not_a_refusal() {
    // The sale runs on in its own task after the request timeout answers:
    // it may sell, so the answer must not say nothing happened.
    // The reset goes through an instance without the short timeout: on a
    // busy machine the reset itself (a write to every backend, every
    // instance told) can take longer than 100 ms, and its answer is not
    // what this test is about.
    reset(
        &app().await,
        20_400,
        json!({"stock": 5, "strategy": "redis-lock", "work_ms": 400}),
    )
    .await;
    let app = app_with(&["--request-timeout-ms", "100"]).await;
    let answer = buy(&app, 20_400, "patient").await;
    assert_eq!(
        answer.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answer.body
    );
    assert_eq!(answer.code(), "outcome_unknown", "{}", answer.body);
    // And it did sell, after the answer.
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    let ledger = call(&app, Method::GET, "/stock/20400", &[], None).await;
    assert_eq!(ledger.body["sold"], json!(1), "{}", ledger.body);
}
