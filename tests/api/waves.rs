//! Release in waves: the stock goes on sale share by share, one wave every
//! `wave_every_ms` from the opening. Between waves a buyer is told
//! `sold_out` with when the next one opens; no strategy can sell what is
//! not on sale yet, and the last wave's sell-out is final.

use std::time::Duration;

use seckill::model::product::now_ms;

use serde_json::json;

use crate::harness::{Race, race_on, raw_buy, shared};

async fn sleep_until(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms.saturating_sub(now_ms()) + 50)).await;
}

/// 5 units in 3 waves (2, 2, 1), 1.5 s apart, under a Redis counter, a
/// PostgreSQL row, two segments and a MySQL row: each wave sells exactly
/// its share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wave_sells_its_share_and_no_more() {
    let lab = shared();
    let gateway = lab.gateway();
    let base = &lab.info.gateway_url;
    let cases = [
        (1907, json!({"strategy": "redis-lua"})),
        (1908, json!({"strategy": "db-atomic"})),
        (1909, json!({"strategy": "segmented", "segments": 2})),
        (1912, json!({"strategy": "db-atomic", "store": "mysql"})),
    ];
    let opens = now_ms() + 500;
    for (id, body) in &cases {
        let mut body = body.clone();
        body["stock"] = json!(5);
        body["opens_at_ms"] = json!(opens);
        body["waves"] = json!(3);
        body["wave_every_ms"] = json!(1500);
        gateway.reset(*id, &body).await.expect("reset");
    }
    sleep_until(opens).await;
    for (wave, share) in [(1, 2), (2, 2), (3, 1)] {
        if wave > 1 {
            sleep_until(opens + (wave - 1) * 1500).await;
        }
        for (id, body) in &cases {
            let strategy = &body["strategy"];
            for n in 0..share {
                let (status, _, answer) = raw_buy(base, *id, &format!("w{wave}-{n}"), None).await;
                assert_eq!(status, 200, "{strategy} wave {wave}: {answer}");
                // The counter holds only this wave: no unit number to tell.
                assert!(answer["stock_left"].is_null(), "{strategy}: {answer}");
            }
            let (status, retry_after, answer) =
                raw_buy(base, *id, &format!("w{wave}-late"), None).await;
            assert_eq!(status, 409, "{strategy} wave {wave}: {answer}");
            assert_eq!(answer["error"]["code"], "sold_out");
            if wave < 3 {
                let next = opens + wave * 1500;
                assert_eq!(answer["error"]["opens_at_ms"], next, "{strategy}: {answer}");
                assert!(
                    retry_after.is_some(),
                    "{strategy}: a Retry-After to the next wave"
                );
            } else {
                assert!(answer["error"]["opens_at_ms"].is_null(), "final: {answer}");
            }
            let ledger = gateway.ledger(*id).await.expect("ledger");
            let released: i64 = [2, 4, 5][wave as usize - 1];
            assert_eq!(
                (
                    ledger.on_sale,
                    ledger.sold,
                    ledger.remaining,
                    ledger.lost_updates
                ),
                (released, released, 0, 0),
                "{strategy} after wave {wave}: {ledger:?}"
            );
        }
    }
}

/// The race driver's buyers, told `sold_out` until the next wave, come
/// back then: 6 units in 3 waves sell exactly, in three bursts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buyers_come_back_for_each_wave() {
    let lab = shared();
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 1910,
            strategy: "redis-lua",
            stock: 6,
            buyers: 30,
            concurrency: 30,
            pace: None,
            settings: json!({"waves": 3, "wave_every_ms": 800}),
        },
    )
    .await;
    assert_eq!(
        (row.sold, row.oversold, row.remaining),
        (6, 0, 0),
        "{row:?}"
    );
    // Every rule of a safe strategy, the unit each buyer was told too.
    assert_eq!(row.history_ok, Some(true), "{row:?}");
    assert!(
        row.errors.get("sold_out").copied().unwrap_or(0) >= 28 + 26,
        "every buyer turned away between waves came back: {row:?}"
    );
}
