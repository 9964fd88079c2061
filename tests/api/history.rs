//! `seckill check`: a real race's history passes against the real ledger,
//! and each kind of doctoring of that history is caught.

use std::path::Path;
use std::process::Command;

use seckill::race::driver::{Audit, RaceSpec, race};
use serde_json::Value;

use crate::harness::shared;

/// Runs `seckill check FILE` against the shared lab; its exit status and
/// output.
fn check(file: &Path) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .arg("check")
        .arg(file)
        .arg("--database-url")
        .arg(&shared().info.postgres_url)
        .output()
        .expect("running seckill check");
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// The history with `doctor` applied to its lines (parsed as JSON).
fn doctored(lines: &[Value], doctor: impl Fn(&mut Vec<Value>)) -> String {
    let mut lines = lines.to_vec();
    doctor(&mut lines);
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_history_passes_and_every_doctored_one_fails() {
    let lab = shared();
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("history.jsonl");
    let audit = Audit {
        history: Some(file.clone()),
        ..lab.audit()
    };
    let spec = RaceSpec {
        product_id: 900,
        strategy: "redis-lua".into(),
        stock: 5,
        buyers: 20,
        concurrency: 10,
        pace: None,
        settings: Default::default(),
        reserving: 0,
        payer: None,
    };
    let row = race(&lab.gateway(), &spec, &audit).await.expect("race");
    assert_eq!(row.history_ok, Some(true), "{row:?}");

    let (ok, text) = check(&file);
    assert!(ok, "the real history must pass: {text}");
    assert!(text.contains("history ok"), "{text}");

    let lines: Vec<Value> = std::fs::read_to_string(&file)
        .expect("history")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    let first_ok = lines
        .iter()
        .position(|l| l["type"] == "ok")
        .expect("an ok line");
    let first_fail = lines
        .iter()
        .position(|l| l["type"] == "fail")
        .expect("a fail line");
    let cases: Vec<(&str, String)> = vec![
        // A 200 nobody recorded: its order id changed.
        (
            "ok_without_order",
            doctored(&lines, |l| {
                l[first_ok]["order_id"] = Value::from(uuid::Uuid::now_v7().to_string())
            }),
        ),
        // A recorded order whose 200 is missing from the history: told
        // "sold out" instead.
        (
            "order_without_ok",
            doctored(&lines, |l| {
                l[first_ok]["type"] = "fail".into();
                l[first_ok]["status"] = 409.into();
            }),
        ),
        // Two 200s for one unit.
        (
            "duplicate_unit",
            doctored(&lines, |l| {
                let ok = l[first_ok].clone();
                let second = l
                    .iter()
                    .rposition(|e| e["type"] == "ok")
                    .expect("another ok");
                l[second]["stock_left"] = ok["stock_left"].clone();
            }),
        ),
        // One order claimed by two 200s.
        (
            "duplicate_ok",
            doctored(&lines, |l| {
                let mut copy = l[first_ok].clone();
                copy["buyer"] = l[first_fail]["buyer"].clone();
                copy["stock_left"] = Value::Null;
                l[first_fail] = copy;
            }),
        ),
        // More sold than the stock: the race line says less was on sale.
        (
            "oversold",
            doctored(&lines, |l| l[0]["race"]["initial"] = 3.into()),
        ),
    ];
    for (violation, text) in cases {
        std::fs::write(&file, text).expect("write");
        let (ok, out) = check(&file);
        assert!(!ok, "{violation}: the doctored history must fail: {out}");
        assert!(out.contains(violation), "{violation} not named: {out}");
    }
}
