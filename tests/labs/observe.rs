//! The Grafana dashboard against the real thing: a lab with `--observe`
//! (Prometheus scraping both instances and nginx's exporter), a small race
//! under a plain Redis strategy, a lock and a group-commit one, and one
//! whose holds go unpaid, then every
//! PromQL expression of `monitoring/grafana/dashboards/seckill.json` run
//! against that Prometheus: each must parse and return data. Both
//! Prometheus configurations, the lab's and compose's, pass `promtool
//! check config`.

use seckill_harness as harness;

use std::process::Command;
use std::time::{Duration, Instant};

use harness::{Race, TestLab, race_on};
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every query of the dashboard, with its panel's title.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = format!("{ROOT}/monitoring/grafana/dashboards/seckill.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().expect("title").to_owned();
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr").to_owned();
            queries.push((title.clone(), expr));
        }
    }
    queries
}

/// The scrape jobs a Prometheus configuration names.
fn jobs(file: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).expect("configuration");
    let config: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).expect("YAML");
    let mut jobs: Vec<String> = config["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs")
        .iter()
        .map(|job| job["job_name"].as_str().expect("job_name").to_owned())
        .collect();
    jobs.sort();
    jobs
}

/// `promtool check config FILE` succeeds.
fn promtool_accepts(file: &std::path::Path) {
    let output = Command::new("promtool")
        .arg("check")
        .arg("config")
        .arg(file)
        .output()
        .expect("running promtool (scripts/deps.sh installs prometheus)");
    assert!(
        output.status.success(),
        "promtool refused {}: {}{}",
        file.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The instant query's answer: its status and how many series came back.
async fn query(prometheus: &str, expr: &str) -> (String, usize, Value) {
    let answer: Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
        .get(format!("{prometheus}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .expect("prometheus answers")
        .json()
        .await
        .expect("JSON");
    let status = answer["status"].as_str().unwrap_or("?").to_owned();
    let series = answer["data"]["result"].as_array().map_or(0, Vec::len);
    (status, series, answer)
}

#[test]
fn compose_prometheus_configuration_is_valid() {
    promtool_accepts(&std::path::Path::new(ROOT).join("monitoring/prometheus.yml"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_returns_data_from_the_labs_prometheus() {
    let lab = TestLab::start_with(2, &["--observe"], &[]);
    let prometheus = lab.info.prometheus_url.clone().expect("--observe");
    let labs = lab.info.dir.join("prometheus/prometheus.yml");
    promtool_accepts(&labs);
    // The dashboard reads both: the same jobs in the lab and in compose.
    let composes = std::path::Path::new(ROOT).join("monitoring/prometheus.yml");
    assert_eq!(jobs(&labs), jobs(&composes));
    let queries = dashboard_queries();
    assert!(queries.len() >= 8, "{queries:?}");

    let gateway = lab.gateway();
    let audit = lab.audit();
    // The fourth holds its sales 300 ms for a payment that never comes:
    // the reapers give them back (the order-life panels).
    let races = [
        (1, "redis-lua", json!({})),
        (2, "redis-lock", json!({})),
        (3, "redis-group", json!({})),
        (4, "redis-lua", json!({"pay_within_ms": 300})),
    ];
    for (product, strategy, settings) in races {
        let row = race_on(
            &audit,
            &gateway,
            Race {
                product,
                strategy,
                stock: 20,
                buyers: 100,
                concurrency: 20,
                pace: None,
                settings,
            },
        )
        .await;
        assert_eq!(row.sold, 20, "{row:?}");
    }
    // Scraped every second; rates look back 30 s. Each query gets until
    // a few scrapes after the race to show the race.
    let deadline = Instant::now() + Duration::from_secs(20);
    for (title, expr) in &queries {
        loop {
            let (status, series, answer) = query(&prometheus, expr).await;
            assert_eq!(status, "success", "{title}: {expr} does not run: {answer}");
            if series > 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{title}: {expr} returned no data: {answer}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
