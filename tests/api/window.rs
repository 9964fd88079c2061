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
