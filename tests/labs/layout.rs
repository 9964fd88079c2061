//! Nothing is cut off at a desktop's width (1280 px) or a phone's
//! (375 px): the reports (`seckill report`, as `race --report` and `race
//! --scenario … --report` write them) and the live page, rendered by
//! headless Chromium and measured element by element
//! (`tests/layout/measure.cjs` through `scripts/playwright.sh`): every
//! text lies within the page's width and within the SVG that draws it,
//! and the page needs no sideways scrolling.

use seckill_harness as harness;

use std::path::Path;
use std::process::Command;

use harness::{Race, TestLab, race_on};
use seckill::lab::client::CatalogEntry;
use seckill::model::info::Expect;
use seckill::model::info::Scenario;
use seckill::stock::strategy::Catalogue;
use serde_json::{Value, json};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const WIDTHS: [u32; 2] = [1280, 375];

/// What the measurement found on `url` at `width`.
fn measure(url: &str, width: u32) -> Value {
    let output = Command::new(format!("{ROOT}/scripts/playwright.sh"))
        .arg(format!("{ROOT}/tests/layout/measure.cjs"))
        .arg(url)
        .arg(width.to_string())
        .output()
        .expect("running scripts/playwright.sh (node and npm: scripts/deps.sh)");
    assert!(
        output.status.success(),
        "measuring {url} at {width}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("one JSON line")
}

/// `url` at every width: something drawn, nothing cut, no sideways scroll.
fn assert_nothing_cut(url: &str, what: &str) {
    for width in WIDTHS {
        let found = measure(url, width);
        assert!(
            found["drawn"].as_u64() > Some(0),
            "{what} at {width}: {found}"
        );
        assert_eq!(found["cut"], json!([]), "{what} at {width} cuts texts off");
        assert!(
            found["scroll_width"].as_u64() <= found["viewport"].as_u64(),
            "{what} at {width} scrolls sideways: {found}"
        );
    }
}

/// `seckill report` of `rows` (a race's `--out` rows) as a page.
fn report(rows: &Value, dir: &Path, name: &str) -> String {
    let input = dir.join(format!("{name}.json"));
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&input, rows.to_string()).expect("rows");
    let status = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .arg("report")
        .arg("--input")
        .arg(&input)
        .arg("--out")
        .arg(&page)
        .status()
        .expect("seckill report");
    assert!(status.success());
    format!("file://{}", page.display())
}

/// A row with the widest numbers a race prints: an oversell of six
/// digits, six-digit rates and latencies.
fn row(label: &str) -> Value {
    json!({"strategy": label, "initial": 100, "sold": 123_456, "oversold": 123_356,
           "rps": 123_456.0, "p99_ms": 98_765.0})
}

#[test]
fn the_reports_cut_nothing_off_at_either_width() {
    let dir = tempfile::tempdir().expect("scratch");
    // Every label the comparison races, from the catalogue: recipes and
    // databases make the longest ones.
    let labels: Vec<String> = Catalogue::new()
        .infos()
        .into_iter()
        .flat_map(|info| {
            let entry: CatalogEntry =
                serde_json::from_value(serde_json::to_value(info).expect("json")).expect("entry");
            entry.labels()
        })
        .collect();
    assert!(labels.iter().any(|l| l == "zookeeper:semaphore-mutex"));
    let comparison = Value::Array(labels.iter().map(|l| row(l)).collect());
    assert_nothing_cut(&report(&comparison, dir.path(), "race"), "the comparison");

    // Every scenario, with a long variant and the longest expectation.
    let expected = Expect::Throttled.text();
    let scenarios: Vec<Value> = Scenario::ALL
        .iter()
        .map(|scenario| {
            let mut line = row("db-transaction");
            line["scenario"] = json!(scenario.name());
            line["variant"] = json!("gw=100/s svc=20/s store=postgres lock+store");
            line["expected"] = json!(expected);
            line["met"] = json!(true);
            line
        })
        .collect();
    assert_nothing_cut(
        &report(&Value::Array(scenarios), dir.path(), "scenarios"),
        "the scenario report",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_page_cuts_nothing_off_at_either_width() {
    let lab = TestLab::start(2);
    let gateway = lab.gateway();
    let audit = lab.audit();
    race_on(
        &audit,
        &gateway,
        Race {
            product: 1,
            strategy: "naive",
            stock: 10,
            buyers: 60,
            concurrency: 20,
            pace: None,
            settings: json!({"work_ms": 5}),
        },
    )
    .await;
    let recipe = json!({"recipe": "semaphore-mutex"});
    race_on(
        &audit,
        &gateway,
        Race {
            product: 2,
            strategy: "zookeeper",
            stock: 10,
            buyers: 60,
            concurrency: 20,
            pace: None,
            settings: recipe,
        },
    )
    .await;
    let elsewhere = json!({"store": "postgres", "max_retries": 1000});
    race_on(
        &audit,
        &gateway,
        Race {
            product: 3,
            strategy: "db-transaction",
            stock: 10,
            buyers: 60,
            concurrency: 20,
            pace: None,
            settings: elsewhere,
        },
    )
    .await;
    // Holds nobody pays: the card's order-life chart and lines.
    race_on(
        &audit,
        &gateway,
        Race {
            stock: 5,
            buyers: 20,
            ..Race::crowd(4, "redis-lua", json!({"pay_within_ms": 300}))
        },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert_nothing_cut(&format!("{}/", lab.info.gateway_url), "the live page");
}
