//! The HTTP contract: every status of the table, through nginx, with the
//! contract's JSON error body.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{http, shared};

/// Sends a request and returns status, `Retry-After` and the JSON body.
async fn call(
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (StatusCode, Option<String>, Value) {
    let lab = shared();
    let mut request = http().request(method, format!("{}{path}", lab.info.gateway_url));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = request.send().await.expect("request");
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap_or_default().to_owned());
    let text = response.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, retry_after, body)
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("<no error code>")
}

async fn reset(id: i64, body: Value) {
    let token = shared().info.admin_token.clone();
    let (status, _, answer) = call(
        Method::PUT,
        &format!("/admin/products/{id}"),
        Some(&token),
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

async fn buy(id: i64, user: &str) -> (StatusCode, Option<String>, Value) {
    call(
        Method::POST,
        &format!("/stock/{id}/buy?user={user}"),
        None,
        None,
    )
    .await
}

#[tokio::test]
async fn malformed_product_ids_are_bad_requests() {
    for id in ["abc", "0", "-1", "18446744073709551616", "1.5", "%E2%82%AC"] {
        let (status, _, body) = buy_raw(id).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {body}");
        assert_eq!(code(&body), "bad_request", "{id}: {body}");
        let (status, _, body) = call(Method::GET, &format!("/stock/{id}"), None, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{id}: {body}");
    }
}

async fn buy_raw(id: &str) -> (StatusCode, Option<String>, Value) {
    call(
        Method::POST,
        &format!("/stock/{id}/buy?user=u1"),
        None,
        None,
    )
    .await
}

#[tokio::test]
async fn unknown_products_are_not_found() {
    let (status, _, body) = buy(987_654_321, "u1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(code(&body), "unknown_product");
    let (status, _, body) = call(Method::GET, "/stock/987654321", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(code(&body), "unknown_product");
}

#[tokio::test]
async fn a_buyer_is_required_and_checked() {
    reset(201, json!({"stock": 5, "strategy": "redis-lua"})).await;
    let (status, _, body) = call(Method::POST, "/stock/201/buy", None, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(code(&body), "bad_request");
    for user in ["", "a%20b", "x%00y", &"x".repeat(65)] {
        let (status, _, body) = buy(201, user).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{user:?}: {body}");
    }
    let ledger = shared().gateway().ledger(201).await.expect("ledger");
    assert_eq!(
        (ledger.sold, ledger.remaining),
        (0, 5),
        "nothing sold by bad requests"
    );
}

#[tokio::test]
async fn the_admin_api_wants_the_token() {
    let body = json!({"stock": 5, "strategy": "redis-lua"}).to_string();
    let (status, _, answer) = call(Method::PUT, "/admin/products/202", None, Some(&body)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{answer}");
    assert_eq!(code(&answer), "unauthorized");
    let (status, _, answer) = call(
        Method::PUT,
        "/admin/products/202",
        Some("not-the-token"),
        Some(&body),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(code(&answer), "forbidden");
    let (status, _, _) = buy(202, "u1").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused reset creates nothing"
    );
}

#[tokio::test]
async fn bad_reset_bodies_are_bad_requests() {
    let token = shared().info.admin_token.clone();
    for body in [
        "not json",
        "{}",
        r#"{"stock": -1, "strategy": "redis-lua"}"#,
        r#"{"stock": 5, "strategy": "no-such-strategy"}"#,
        r#"{"stock": 5, "strategy": "redis-lua", "work_ms": 999999999}"#,
        r#"{"stock": 5, "strategy": "redis-lua", "lease_ms": 0}"#,
        r#"{"stock": 5, "strategy": "redis-lua", "surprise": 1}"#,
        r#"{"stock": "many", "strategy": "redis-lua"}"#,
    ] {
        let (status, _, answer) =
            call(Method::PUT, "/admin/products/203", Some(&token), Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(code(&answer), "bad_request", "{body}: {answer}");
    }
    let (status, _, _) = buy(203, "u1").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "a refused reset creates nothing"
    );
}

#[tokio::test]
async fn a_sale_then_sold_out() {
    reset(204, json!({"stock": 1, "strategy": "redis-lua"})).await;
    let (status, _, body) = buy(204, "first").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["product_id"], 204);
    assert_eq!(body["strategy"], "redis-lua");
    assert!(
        body["order_id"].as_str().is_some_and(|s| s.len() == 36),
        "{body}"
    );
    assert!(
        body["served_by"]
            .as_str()
            .is_some_and(|s| s.starts_with("instance-"))
    );
    let (status, _, body) = buy(204, "second").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(code(&body), "sold_out");
}

#[tokio::test]
async fn a_lock_not_acquired_in_time_is_busy_with_retry_after() {
    // The first buyer holds the lock for 1 s; the second waits 0 ms.
    reset(
        205,
        json!({"stock": 5, "strategy": "redis-lock", "work_ms": 1000, "acquire_timeout_ms": 0}),
    )
    .await;
    let holder = tokio::spawn(buy(205, "holder"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, retry_after, body) = buy(205, "waiter").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(code(&body), "busy");
    assert_eq!(retry_after.as_deref(), Some("1"));
    let (status, _, _) = holder.await.expect("holder");
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn unknown_routes_and_methods_get_json_errors() {
    let (status, _, body) = call(Method::GET, "/nope", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(code(&body), "not_found");
    let (status, _, body) = call(Method::GET, "/stock/1/buy", None, None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{body}");
    assert_eq!(code(&body), "method_not_allowed");
}

#[tokio::test]
async fn health_readiness_catalogue_and_report() {
    for path in ["/healthz", "/readyz"] {
        let (status, _, body) = call(Method::GET, path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (status, _, body) = call(Method::GET, "/strategies", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = body
        .as_array()
        .expect("array")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    for id in [
        "naive",
        "local-mutex",
        "redis-lock",
        "redis-lua",
        "db-optimistic",
        "db-atomic",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    for entry in body.as_array().expect("array") {
        for key in [
            "backend",
            "mechanism",
            "safe",
            "safe_against",
            "unsafe_against",
        ] {
            assert!(!entry[key].is_null(), "{key} missing in {entry}");
        }
    }

    reset(206, json!({"stock": 3, "strategy": "db-atomic"})).await;
    let (status, _, _) = buy(206, "report-buyer").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, body) = call(Method::GET, "/report", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let line = body
        .as_array()
        .expect("array")
        .iter()
        .find(|l| l["id"] == 206)
        .expect("product 206 in the report")
        .clone();
    assert_eq!(
        (line["initial"].as_i64(), line["sold"].as_i64()),
        (Some(3), Some(1))
    );
    assert_eq!(line["remaining"].as_i64(), Some(2));

    let response = http()
        .get(format!("{}/report?format=csv", shared().info.gateway_url))
        .send()
        .await
        .expect("csv");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let csv = response.text().await.expect("csv body");
    assert!(csv.starts_with("id,strategy,initial,sold"), "{csv}");
    assert!(
        csv.lines().any(|l| l.starts_with("206,db-atomic,3,1,2,")),
        "{csv}"
    );
}

#[tokio::test]
async fn nginx_spreads_buys_over_both_instances() {
    reset(207, json!({"stock": 10, "strategy": "redis-lua"})).await;
    let mut served = std::collections::BTreeSet::new();
    for i in 0..6 {
        let (status, _, body) = buy(207, &format!("rr{i}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        served.insert(body["served_by"].as_str().expect("served_by").to_owned());
    }
    assert_eq!(
        served.len(),
        2,
        "round-robin over two instances: {served:?}"
    );
}

#[tokio::test]
async fn a_reset_clears_the_previous_sale() {
    reset(208, json!({"stock": 2, "strategy": "db-atomic"})).await;
    let (status, _, _) = buy(208, "before").await;
    assert_eq!(status, StatusCode::OK);
    reset(208, json!({"stock": 4, "strategy": "redis-lock"})).await;
    let ledger = shared().gateway().ledger(208).await.expect("ledger");
    assert_eq!(
        (
            ledger.initial,
            ledger.sold,
            ledger.remaining,
            ledger.strategy.as_str()
        ),
        (4, 0, 4, "redis-lock")
    );
}
