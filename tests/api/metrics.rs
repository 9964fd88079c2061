//! `GET /metrics`: after a race, the instances' counters add up to what the
//! driver and the ledger saw.

use serde_json::json;

use crate::harness::{Race, TestLab, http, race_on};

/// The sum over `texts` of every sample of `name` whose labels include all
/// of `labels` (`key="value"` pairs).
fn sum(texts: &[String], name: &str, labels: &[&str]) -> f64 {
    texts
        .iter()
        .flat_map(|t| t.lines())
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && labels.iter().all(|l| rest.contains(l))).then_some(value)
        })
        .map(|v| v.parse::<f64>().expect("a sample value"))
        .sum()
}

/// Every instance's `GET /metrics`, checked to be Prometheus text.
async fn scrape(lab: &TestLab) -> Vec<String> {
    let mut texts = Vec::new();
    for instance in &lab.info.instances {
        let response = http()
            .get(format!("{}/metrics", instance.url))
            .send()
            .await
            .expect("metrics");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        texts.push(response.text().await.expect("body"));
    }
    texts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_races_counts_show_in_the_instances_metrics() {
    // Its own lab: counters are per process, and other tests race too.
    let lab = TestLab::start(2);
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 1300,
            strategy: "redis-lock",
            stock: 20,
            buyers: 100,
            concurrency: 20,
            pace: None,
            settings: json!({"work_ms": 2}),
        },
    )
    .await;
    let texts = scrape(&lab).await;
    let strategy = r#"strategy="redis-lock""#;
    let sold = sum(
        &texts,
        "seckill_buys_total",
        &[strategy, r#"outcome="sold""#],
    );
    assert_eq!(sold as i64, row.sold, "{texts:?}");
    let sold_out = sum(
        &texts,
        "seckill_buys_total",
        &[strategy, r#"outcome="sold_out""#],
    ) + sum(&texts, "seckill_sold_out_flag_total", &[]);
    assert_eq!(sold_out as u64, row.errors["sold_out"], "{texts:?}");
    // Every sale held the lock once; the writer stored every order.
    let held = sum(&texts, "seckill_lock_hold_seconds_count", &[strategy]);
    assert!(
        held >= row.sold as f64,
        "{held} holds for {} sales",
        row.sold
    );
    let stored = sum(&texts, "seckill_order_writer_batch_size_sum", &[]);
    assert_eq!(stored as i64, row.sold, "{texts:?}");

    // A group-commit strategy's queue: every buy that ran it was in
    // exactly one group, and waited once.
    let grouped = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 1301,
            strategy: "db-group",
            stock: 30,
            buyers: 120,
            concurrency: 32,
            pace: None,
            settings: json!({}),
        },
    )
    .await;
    let texts = scrape(&lab).await;
    let group = r#"strategy="db-group""#;
    assert_eq!(grouped.sold, 30, "{grouped:?}");
    let ran = sum(&texts, "seckill_buys_total", &[group]);
    let in_groups = sum(&texts, "seckill_group_size_sum", &[group]);
    let waits = sum(&texts, "seckill_group_wait_seconds_count", &[group]);
    let groups = sum(&texts, "seckill_group_size_count", &[group]);
    assert!(ran > 0.0, "{texts:?}");
    assert_eq!(in_groups, ran, "buyers in groups vs buys run: {texts:?}");
    assert_eq!(waits, ran, "one wait per buyer: {texts:?}");
    assert!(
        (1.0..=ran).contains(&groups),
        "{groups} groups for {ran} buys"
    );
}
