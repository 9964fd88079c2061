//! Hostile input, table-driven, through nginx and directly: every request
//! gets a 4xx with the contract's JSON error body — never a 500 — and the
//! ledger is the same afterwards.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::harness::{http, shared};

/// One malformed request and the statuses it may get.
struct Case {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Option<String>,
    token: bool,
    header: Option<(&'static str, String)>,
    expected: &'static [u16],
}

fn case(method: Method, path: &str, expected: &'static [u16]) -> Case {
    Case {
        method,
        path: path.to_owned(),
        content_type: None,
        body: None,
        token: false,
        header: None,
        expected,
    }
}

fn buy_with_header(name: &'static str, value: &str) -> Case {
    Case {
        header: Some((name, value.to_owned())),
        ..case(Method::POST, &format!("/stock/{P}/buy?user=u"), &[400])
    }
}

fn reset_with(body: &str, expected: &'static [u16]) -> Case {
    Case {
        content_type: Some("application/json"),
        body: Some(body.to_owned()),
        token: true,
        ..case(Method::PUT, "/admin/products/701", expected)
    }
}

const P: i64 = 701;

fn cases() -> Vec<Case> {
    let buy = |path: &str| case(Method::POST, path, &[400]);
    let long_user = "u".repeat(10 * 1024);
    vec![
        buy("/stock/0/buy?user=u"),
        buy("/stock/-1/buy?user=u"),
        buy("/stock/18446744073709551616/buy?user=u"),
        buy("/stock/9223372036854775808/buy?user=u"),
        buy("/stock/abc/buy?user=u"),
        buy("/stock/%E2%82%AC/buy?user=u"),
        buy("/stock/1e3/buy?user=u"),
        buy("/stock/..%2F..%2Fetc%2Fpasswd/buy?user=u"),
        case(
            Method::POST,
            &format!("/stock/{P}/../../admin/products/{P}?user=u"),
            &[404, 405],
        ),
        buy(&format!("/stock/{P}/buy")),
        buy(&format!("/stock/{P}/buy?user=")),
        // nginx answers a 10 KB request line with 414, the service with 400.
        case(
            Method::POST,
            &format!("/stock/{P}/buy?user={long_user}"),
            &[400, 414],
        ),
        buy(&format!("/stock/{P}/buy?user=a%01b")),
        buy(&format!("/stock/{P}/buy?user=a%00b")),
        buy(&format!("/stock/{P}/buy?user=%E2%82%AC")),
        buy(&format!("/stock/{P}/buy?user=a%20b")),
        buy(&format!(
            "/stock/{P}/buy?user=%27%3B%20DROP%20TABLE%20orders"
        )),
        buy_with_header("Idempotency-Key", ""),
        buy_with_header("Idempotency-Key", &"k".repeat(129)),
        buy_with_header("Idempotency-Key", "two words"),
        reset_with("not json", &[400]),
        reset_with("", &[400]),
        reset_with("[]", &[400]),
        reset_with(r#"{"stock": -1, "strategy": "redis-lua"}"#, &[400]),
        reset_with(
            r#"{"stock": 9223372036854775808, "strategy": "redis-lua"}"#,
            &[400],
        ),
        reset_with(r#"{"stock": "10", "strategy": "redis-lua"}"#, &[400]),
        reset_with(r#"{"stock": 10, "strategy": "no-such"}"#, &[400]),
        reset_with(
            r#"{"stock": 10, "strategy": "segmented", "segments": 0}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lua", "work_ms": 1000000000000}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lock", "lease_ms": 0}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lock", "max_retries": -1}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lua", "per_user_limit": -1}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lua", "per_user_limit": 2000000}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redlock", "quorum": "some"}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lock", "store": "mongodb"}"#,
            &[400],
        ),
        reset_with(
            r#"{"stock": 10, "strategy": "redis-lua", "admin": true}"#,
            &[400],
        ),
        reset_with(
            &format!(
                r#"{{"stock": 10, "strategy": "{}"}}"#,
                "x".repeat(40 * 1024)
            ),
            &[400, 413],
        ),
        Case {
            content_type: Some("text/plain"),
            ..reset_with(r#"{"stock": 10, "strategy": "redis-lua"}"#, &[400])
        },
        Case {
            token: false,
            ..reset_with(r#"{"stock": 10, "strategy": "redis-lua"}"#, &[401])
        },
        case(Method::GET, "/stock/1/buy", &[405]),
        case(Method::PUT, "/stock/1/buy", &[405]),
        case(Method::DELETE, &format!("/stock/{P}"), &[405]),
        case(Method::POST, "/report", &[405]),
        case(Method::GET, &format!("/admin/products/{P}"), &[405]),
        case(Method::GET, "/report?format=xml", &[400]),
        // nginx answers TRACE itself, in the contract's shape too.
        case(Method::TRACE, &format!("/stock/{P}/buy"), &[405]),
        case(Method::TRACE, "/report", &[405]),
        // A malformed `?user=` is refused even beside a good header.
        Case {
            header: Some(("x-user-id", "u".to_owned())),
            ..case(Method::POST, &format!("/stock/{P}/buy?user=%2A"), &[400])
        },
        case(Method::GET, "/nope", &[404]),
        // A made-up hidden path, on a product that sells on its plain one.
        case(Method::POST, &format!("/stock/{P}/buy/more?user=u"), &[403]),
        case(
            Method::POST,
            &format!("/stock/{P}/buy/more/again?user=u"),
            &[404],
        ),
    ]
}

async fn send(base: &str, token: &str, case: &Case) -> (u16, Value) {
    let mut request = http().request(case.method.clone(), format!("{base}{}", case.path));
    if case.token {
        request = request.bearer_auth(token);
    }
    if let Some(content_type) = case.content_type {
        request = request.header("content-type", content_type);
    }
    if let Some((name, value)) = &case.header {
        request = request.header(*name, value);
    }
    if let Some(body) = &case.body {
        request = request.body(body.clone());
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_requests_get_4xx_json_and_change_nothing() {
    let lab = shared();
    let gateway = lab.gateway();
    gateway
        .reset(P, &json!({"stock": 10, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    let before = gateway.ledger(P).await.expect("ledger");
    let table = cases();
    assert!(table.len() >= 30, "at least 30 hostile requests");
    for base in [
        lab.info.gateway_url.as_str(),
        lab.info.instances[0].url.as_str(),
    ] {
        for case in &table {
            let (status, body) = send(base, &lab.info.admin_token, case).await;
            let what = format!(
                "{} {} via {base}",
                case.method,
                &case.path[..case.path.len().min(80)]
            );
            assert!(
                case.expected.contains(&status),
                "{what}: got {status} {body}"
            );
            assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR.as_u16(), "{what}");
            assert!(
                body["error"]["code"].is_string(),
                "{what}: not the contract's body: {body}"
            );
            assert!(body["error"]["message"].is_string(), "{what}: {body}");
        }
    }
    let after = gateway.ledger(P).await.expect("ledger");
    assert_eq!(before, after, "hostile input changed the ledger");
}
