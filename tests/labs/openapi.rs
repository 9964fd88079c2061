//! The contract, fuzzed against a real lab: Schemathesis reads
//! `GET /openapi.json` from the gateway and sends every route what the
//! document allows and what it does not (with the admin token, so resets
//! run too). It must find nothing: no server error, every answer's status,
//! content type, headers and body as documented, invalid requests refused,
//! valid ones taken. Then the ledger must show that only the 200s changed
//! anything: each product's orders are exactly the sales Schemathesis was
//! told of since the product's last reset, and a product nobody reset or
//! bought from is as it was.
//!
//! Schemathesis comes from PyPI, pinned, through `scripts/schemathesis.sh`
//! (which installs it under target/ when missing); its settings and hooks
//! are in tests/schemathesis/.

use seckill_harness as harness;

use std::collections::BTreeMap;
use std::path::Path;

use harness::{TestLab, http};
use seckill::model::product::Product;
use seckill::orders::ledger::Ledger;
use serde_json::{Value, json};

/// Test cases per operation and phase: enough to reach every status,
/// few enough that the run takes seconds on two cores.
const MAX_EXAMPLES: &str = "30";

/// One request of the run and its answer, from Schemathesis' HAR report.
struct Exchange {
    /// When it was sent (RFC 3339, one time zone): the run's order.
    started: String,
    method: String,
    url: String,
    /// 0 when no answer came (a network error).
    status: u16,
    /// The answer's `Idempotent-Replayed`: an earlier sale answered again.
    replayed: bool,
    /// The answer's body, when it is JSON.
    body: Value,
}

/// The exchanges of a HAR file, in the order they were sent.
fn exchanges(har: &Path) -> Vec<Exchange> {
    let text = std::fs::read_to_string(har).expect("Schemathesis' HAR report");
    let har: Value = serde_json::from_str(&text).expect("HAR is JSON");
    let mut all: Vec<Exchange> = har["log"]["entries"]
        .as_array()
        .expect("HAR entries")
        .iter()
        .map(|entry| {
            let response = &entry["response"];
            let header = |name: &str| {
                response["headers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|h| {
                        h["name"]
                            .as_str()
                            .is_some_and(|n| n.eq_ignore_ascii_case(name))
                    })
                    .and_then(|h| h["value"].as_str())
                    .map(str::to_owned)
            };
            let body = response["content"]["text"]
                .as_str()
                .and_then(|text| serde_json::from_str(text).ok())
                .unwrap_or(Value::Null);
            Exchange {
                started: entry["startedDateTime"]
                    .as_str()
                    .expect("a start")
                    .to_owned(),
                method: entry["request"]["method"]
                    .as_str()
                    .expect("a method")
                    .to_owned(),
                url: entry["request"]["url"].as_str().expect("a url").to_owned(),
                status: response["status"].as_u64().expect("a status") as u16,
                replayed: header("idempotent-replayed").as_deref() == Some("true"),
                body,
            }
        })
        .collect();
    all.sort_by(|a, b| a.started.cmp(&b.started));
    all
}

/// Every product's ledger, by id.
async fn ledgers(gateway: &str) -> BTreeMap<i64, Ledger> {
    let report: Vec<Ledger> = http()
        .get(format!("{gateway}/report"))
        .send()
        .await
        .expect("GET /report")
        .json()
        .await
        .expect("the report is JSON");
    report.into_iter().map(|l| (l.id, l)).collect()
}

/// What the run did to one product, as its client saw it.
#[derive(Default)]
struct Seen {
    /// The answer to the last reset that succeeded, if any did.
    reset: Option<Product>,
    /// Sales (200s that were not replays) since that reset.
    sales: i64,
    /// Units restocked (200s that were not replays) since that reset.
    added: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_the_service_as_documented() {
    let lab = TestLab::start(2);
    let gateway = lab.info.gateway_url.clone();
    // Products for the buys to reach (Schemathesis favours small ids,
    // 1 first), under a lock-free, a database and a locked strategy.
    let target = lab.gateway();
    for (id, strategy) in [(1, "redis-lua"), (2, "db-atomic"), (3, "redis-lock")] {
        target
            .reset(id, &json!({"stock": 5, "strategy": strategy}))
            .await
            .expect("seeding a product");
    }
    let before = ledgers(&gateway).await;

    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a scratch directory");
    let har = dir.path().join("run.har");
    let started = std::time::Instant::now();
    // The stores each strategy takes, for the hooks (the document lists
    // every store; which one a strategy takes is the catalogue's).
    let stores: serde_json::Map<String, serde_json::Value> =
        seckill::stock::strategy::Catalogue::new()
            .infos()
            .into_iter()
            .map(|info| (info.id.to_owned(), json!(info.stores)))
            .collect();
    let status = tokio::process::Command::new(root.join("scripts/schemathesis.sh"))
        // Schemathesis keeps its example database and reports in its
        // working directory.
        .current_dir(dir.path())
        .env(
            "SECKILL_STORES",
            serde_json::Value::Object(stores).to_string(),
        )
        .arg(format!("{gateway}/openapi.json"))
        .args([
            "--header",
            &format!("Authorization: Bearer {}", lab.info.admin_token),
        ])
        .args(["--max-examples", MAX_EXAMPLES])
        // One request at a time: the ledger check below reads the run in
        // order, and a sequential run has no contention to excuse.
        .args(["--workers", "1"])
        .args(["--request-timeout", "10"])
        .args(["--report", "har", "--report-har-path"])
        .arg(&har)
        .arg("--no-color")
        .status()
        .await
        .expect("running scripts/schemathesis.sh");
    eprintln!("schemathesis took {:.1?}", started.elapsed());
    assert!(
        status.success(),
        "Schemathesis found problems (above): {status}"
    );

    let run = exchanges(&har);
    // Every outcome is known: a 5xx other than `busy` (nothing happened)
    // would leave the ledger check below nothing honest to compare.
    for exchange in &run {
        let known = matches!(exchange.status, 200..=499)
            || (exchange.status == 503 && exchange.body["error"]["code"] == "busy");
        assert!(
            known,
            "{} {} got {} {}: an outcome the ledger cannot be checked against",
            exchange.method, exchange.url, exchange.status, exchange.body
        );
    }
    let mut seen: BTreeMap<i64, Seen> = BTreeMap::new();
    for exchange in run.iter().filter(|e| e.status == 200) {
        let path = exchange.url.split('?').next().unwrap_or_default();
        if exchange.method == "PUT" && path.contains("/admin/products/") {
            let product: Product =
                serde_json::from_value(exchange.body.clone()).expect("a reset answers a product");
            let id = product.id;
            seen.insert(
                id,
                Seen {
                    reset: Some(product),
                    ..Seen::default()
                },
            );
        } else if exchange.method == "POST" && path.ends_with("/restock") {
            let id = exchange.body["product_id"]
                .as_i64()
                .expect("a restock names its product");
            if exchange.body["replayed"] != Value::Bool(true) {
                seen.entry(id).or_default().added +=
                    exchange.body["units"].as_i64().expect("a restock's units");
            }
        } else if exchange.method == "POST" && path.ends_with("/buy") && !exchange.replayed {
            let id = exchange.body["product_id"]
                .as_i64()
                .expect("a sale names its product");
            seen.entry(id).or_default().sales += 1;
        }
    }
    let resets = seen.values().filter(|s| s.reset.is_some()).count();
    let sales: i64 = seen.values().map(|s| s.sales).sum();
    let refused = run
        .iter()
        .filter(|e| !(200..300).contains(&e.status))
        .count();
    eprintln!(
        "{} requests: {resets} products reset, {sales} sales, {refused} refused",
        run.len()
    );
    assert!(resets > 0, "no reset succeeded: was the admin token sent?");
    assert!(
        run.iter()
            .any(|e| e.status == 409 || (e.status == 200 && e.method == "POST")),
        "no buy reached a strategy"
    );

    let after = ledgers(&gateway).await;
    for id in before.keys() {
        assert!(after.contains_key(id), "product {id} vanished");
    }
    for (id, ledger) in &after {
        let seen = seen.remove(id).unwrap_or_default();
        let (initial, epoch, sold_before, added_before) = match (&seen.reset, before.get(id)) {
            (Some(reset), _) => (reset.initial, reset.epoch, 0, 0),
            (None, Some(was)) => (was.initial, was.epoch, was.sold, was.added),
            (None, None) => panic!("product {id} appeared without a reset: {ledger:?}"),
        };
        assert_eq!(
            (ledger.initial, ledger.epoch),
            (initial + seen.added, epoch),
            "product {id} was reset or restocked by a request that was refused: {ledger:?}"
        );
        assert_eq!(
            ledger.added,
            added_before + seen.added,
            "product {id}: additions != 200 restocks since its last reset: {ledger:?}"
        );
        assert_eq!(
            ledger.sold,
            sold_before + seen.sales,
            "product {id}: orders != 200s since its last reset: {ledger:?}"
        );
        // One buy at a time: even the unsafe strategies sell correctly.
        assert_eq!(
            (ledger.oversold, ledger.lost_updates, ledger.missing_orders),
            (0, 0, 0),
            "product {id}: {ledger:?}"
        );
    }
    assert!(
        seen.is_empty(),
        "sales or resets of unknown products: {:?}",
        seen.keys().collect::<Vec<_>>()
    );
}
