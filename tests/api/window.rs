//! The sale window: before `opens_at_ms` a buy is 403 `not_started` with
//! the seconds left (body and `Retry-After`), from `closes_at_ms` on it is
//! 410 `ended`; neither sells nor touches the stock, and in between the
//! product sells as usual.

use std::time::Duration;

use seckill::model::product::now_ms;

use serde_json::json;

use crate::harness::{http, raw_buy, shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_sells_only_inside_its_window() {
    let lab = shared();
    let gateway = lab.gateway();
    let base = &lab.info.gateway_url;

    // Opens in 1.5 s: refused with the seconds left, nothing sold.
    let opens = now_ms() + 1_500;
    gateway
        .reset(
            1901,
            &json!({"stock": 3, "strategy": "redis-lua", "opens_at_ms": opens}),
        )
        .await
        .expect("reset");
    let (status, retry_after, body) = raw_buy(base, 1901, "early", None).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "not_started", "{body}");
    let left = body["error"]["seconds_left"]
        .as_u64()
        .expect("seconds_left");
    assert!((1..=2).contains(&left), "{body}");
    assert_eq!(retry_after, Some(left));
    let ledger = gateway.ledger(1901).await.expect("ledger");
    assert_eq!((ledger.sold, ledger.remaining), (0, 3));

    // Once open, it sells.
    let wait = opens.saturating_sub(now_ms()) + 50;
    tokio::time::sleep(Duration::from_millis(wait)).await;
    let (status, _, body) = raw_buy(base, 1901, "on-time", None).await;
    assert_eq!(status, 200, "{body}");

    // Closed: 410, nothing sold, under a strategy that sells in PostgreSQL
    // too.
    let opened = now_ms() - 10_000;
    gateway
        .reset(
            1902,
            &json!({"stock": 3, "strategy": "db-atomic",
                    "opens_at_ms": opened, "closes_at_ms": opened + 5_000}),
        )
        .await
        .expect("reset");
    let (status, retry_after, body) = raw_buy(base, 1902, "late", None).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(body["error"]["code"], "ended", "{body}");
    assert_eq!(retry_after, None);
    assert_eq!(gateway.ledger(1902).await.expect("ledger").sold, 0);

    // A window that closes before it opens is refused at the reset.
    let refused = http()
        .put(format!("{base}/admin/products/1903"))
        .bearer_auth(&lab.info.admin_token)
        .json(&json!({"stock": 1, "strategy": "redis-lua",
                      "opens_at_ms": opens, "closes_at_ms": opens}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(refused.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buyers_who_come_early_return_at_the_opening_and_the_table_shows_the_rush() {
    use seckill::race::driver::{fire, reset, settled_row};
    let lab = shared();
    let gateway = lab.gateway();
    let settings = seckill::model::product::Settings {
        opens_at_ms: now_ms() + 1_000,
        ..Default::default()
    };
    reset(&gateway, 1904, "redis-lua", 5, settings)
        .await
        .expect("reset");
    let began = std::time::Instant::now();
    let attempts = fire(&gateway, 1904, "rush", 20, 20, None).await;
    // Each buyer was told `not_started` once, with the opening, and came
    // back for it: 20 early requests, then 5 sales and 15 sold out.
    let early: Vec<_> = attempts
        .iter()
        .filter(|a| a.answer.code.as_deref() == Some("not_started"))
        .collect();
    assert_eq!(early.len(), 20, "{attempts:?}");
    assert!(
        early
            .iter()
            .all(|a| a.answer.opens_at_ms == Some(settings.opens_at_ms))
    );
    assert_eq!(attempts.len(), 40, "{attempts:?}");
    let row = settled_row(&gateway, &lab.audit(), 1904, &attempts, began)
        .await
        .expect("row");
    assert_eq!(
        (row.sold, row.client_ok, row.oversold),
        (5, 5, 0),
        "{row:?}"
    );
    assert_eq!(row.errors.get("sold_out"), Some(&15), "{row:?}");
    assert_eq!(row.history_ok, Some(true), "{row:?}");
    let opening = row.opening.expect("a row with a window shows its opening");
    assert_eq!(opening.early, 20);
    // The last sale came after the opening (how long after is measured,
    // not asserted).
    assert!(
        opening.last_sale_ms.is_some_and(|ms| ms >= 0.0),
        "{opening:?}"
    );
}

/// `POST /admin/products/{id}/window`: a pause answers once neither
/// instance sells (each judged by its own copy of the product), a resume
/// sells again, a close ends the sale for good; none of them touches the
/// stock or an order, and a hold made before the close is paid after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sale_paused_resumed_and_closed_keeps_its_orders_and_holds() {
    use seckill::lab::client::OrderAction;
    use seckill::model::product::operation::WindowAction::{Close, Pause, Resume};
    let lab = shared();
    let gateway = lab.gateway();
    let urls: Vec<String> = lab.info.instances.iter().map(|i| i.url.clone()).collect();
    gateway
        .reset(
            1921,
            &json!({"stock": 5, "strategy": "redis-lua", "pay_within_ms": 60_000}),
        )
        .await
        .expect("reset");
    // Both instances hold a copy of the product from a sale each.
    let mut holds = Vec::new();
    for (i, url) in urls.iter().enumerate() {
        let (status, _, body) = raw_buy(url, 1921, &format!("open-{i}"), None).await;
        assert_eq!(status, 200, "{body}");
        holds.push((body["order_id"].as_str().expect("an order").to_owned(), i));
    }
    let paused = gateway.window_answer(1921, Pause).await.expect("pause");
    assert!(paused.changed && paused.paused, "{paused:?}");
    for url in &urls {
        let (status, retry_after, body) = raw_buy(url, 1921, "paused", None).await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"]["code"], "not_started", "{body}");
        assert!(body["error"]["seconds_left"].is_null(), "{body}");
        assert_eq!(retry_after, Some(1));
    }
    let again = gateway.window_answer(1921, Pause).await.expect("pause");
    assert!(
        !again.changed,
        "a second pause changed something: {again:?}"
    );
    let resumed = gateway.window_answer(1921, Resume).await.expect("resume");
    assert!(resumed.changed && !resumed.paused, "{resumed:?}");
    let (status, _, body) = raw_buy(&urls[1], 1921, "resumed", None).await;
    assert_eq!(status, 200, "{body}");
    let closed = gateway.window_answer(1921, Close).await.expect("close");
    assert!(closed.changed, "{closed:?}");
    assert!(closed.closes_at_ms > 0 && closed.closes_at_ms <= closed.at_ms);
    for url in &urls {
        let (status, _, body) = raw_buy(url, 1921, "closed", None).await;
        assert_eq!((status, &body["error"]["code"]), (410, &json!("ended")));
    }
    for action in [Pause, Resume] {
        let refused = gateway.window(1921, action).await;
        assert_eq!(
            (refused.status, refused.code.as_deref()),
            (410, Some("ended"))
        );
    }
    let closed_again = gateway.window_answer(1921, Close).await.expect("close");
    assert!(!closed_again.changed, "{closed_again:?}");
    // The holds made before the close are paid after it.
    for (order, i) in holds {
        let order = order.parse().expect("a uuid");
        let paid = gateway
            .order(OrderAction::Pay, order, &format!("open-{i}"))
            .await;
        assert_eq!((paid.status, paid.said.as_str()), (200, "paid"), "{paid:?}");
    }
    let ledger = gateway.ledger(1921).await.expect("ledger");
    assert_eq!(
        (ledger.initial, ledger.sold, ledger.remaining, ledger.paid),
        (5, 3, 2, 2),
        "{ledger:?}"
    );
}

#[tokio::test]
async fn bad_window_requests_are_refused_and_change_nothing() {
    let lab = shared();
    let base = &lab.info.gateway_url;
    lab.gateway()
        .reset(1922, &json!({"stock": 2, "strategy": "db-atomic"}))
        .await
        .expect("reset");
    let send = |id: i64, token: Option<&str>, body: &'static str| {
        let mut request = http()
            .post(format!("{base}/admin/products/{id}/window"))
            .header("content-type", "application/json")
            .body(body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.expect("an answer");
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.expect("a JSON body");
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
            )
        }
    };
    let token = Some(lab.info.admin_token.as_str());
    let cases = [
        (
            send(1922, None, r#"{"action":"pause"}"#).await,
            401,
            "unauthorized",
        ),
        (
            send(1922, Some("nope"), r#"{"action":"pause"}"#).await,
            403,
            "forbidden",
        ),
        (
            send(1922, token, r#"{"action":"open"}"#).await,
            400,
            "bad_request",
        ),
        (
            send(1922, token, r#"{"action":"pause","at":1}"#).await,
            400,
            "bad_request",
        ),
        (send(1922, token, "").await, 400, "bad_request"),
        (
            send(991_922, token, r#"{"action":"pause"}"#).await,
            404,
            "unknown_product",
        ),
    ];
    for (i, ((status, code), want, want_code)) in cases.into_iter().enumerate() {
        assert_eq!((status, code.as_str()), (want, want_code), "case {i}");
    }
    let (status, _, body) = raw_buy(base, 1922, "still-open", None).await;
    assert_eq!(status, 200, "{body}");
}
