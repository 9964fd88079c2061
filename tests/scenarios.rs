//! Every named scenario, run the way users run it (`seckill race
//! --scenario NAME --json FILE`), each starting its own lab and injecting
//! its fault. The binary's exit code says whether every expectation was
//! met; the rows are checked here too, so a wrong expectation cannot pass
//! silently.
//!
//! Scenarios run one at a time (a process-wide lock): each brings up a
//! whole topology, and the timing faults (freeze for longer than a lease)
//! should not compete with another lab for two cores.

use std::process::Command;
use std::sync::Mutex;

use seckill::race::scenario::ScenarioRow;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs a scenario with small knobs and returns its rows.
fn scenario(name: &str) -> Vec<ScenarioRow> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let page = tempfile::NamedTempFile::new().expect("temp file");
    let status = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args([
            "race",
            "--scenario",
            name,
            "--stock",
            "20",
            "--buyers",
            "200",
        ])
        .args(["--concurrency", "50", "--json"])
        .arg(out.path())
        .arg("--report")
        .arg(page.path())
        .status()
        .expect("running seckill race");
    let rows: Vec<ScenarioRow> =
        serde_json::from_str(&std::fs::read_to_string(out.path()).expect("json")).expect("rows");
    for row in &rows {
        assert!(row.met, "{name}: expectation not met: {row:?}");
        assert_eq!(row.row.client_ok, row.row.sold, "{row:?}");
    }
    assert!(status.success(), "{name}: seckill race exited {status}");
    check_report(
        &std::fs::read_to_string(page.path()).expect("report"),
        &rows,
    );
    // `seckill report` draws the same from the JSON, and the chart alone.
    let svg = tempfile::NamedTempFile::new().expect("temp file");
    let redrawn = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .arg("report")
        .arg("--input")
        .arg(out.path())
        .arg("--out")
        .arg(page.path())
        .arg("--svg")
        .arg(svg.path())
        .status()
        .expect("running seckill report");
    assert!(redrawn.success());
    check_report(
        &std::fs::read_to_string(page.path()).expect("report"),
        &rows,
    );
    let chart = std::fs::read_to_string(svg.path()).expect("svg");
    assert!(chart.starts_with("<svg"), "{chart}");
    assert_eq!(chart.matches(r#"class="bar""#).count(), rows.len());
    rows
}

/// The HTML page has a bar per row with its numbers, and a tick per met
/// expectation (chart and table).
fn check_report(page: &str, rows: &[ScenarioRow]) {
    assert!(page.starts_with("<!doctype html>"));
    assert!(
        !page.contains("<script src") && !page.contains("<link"),
        "self-contained"
    );
    assert_eq!(page.matches(r#"class="bar""#).count(), rows.len());
    for row in rows {
        let r = &row.row;
        assert!(
            page.contains(&format!(
                r#"data-initial="{}" data-sold="{}" data-oversold="{}""#,
                r.initial, r.sold, r.oversold
            )),
            "{row:?}"
        );
    }
    assert_eq!(page.matches('✓').count(), 2 * rows.len(), "every row met");
}

fn row<'a>(rows: &'a [ScenarioRow], strategy: &str, variant: &str) -> &'a ScenarioRow {
    rows.iter()
        .find(|r| r.row.strategy == strategy && r.variant == variant)
        .unwrap_or_else(|| panic!("no row {strategy} {variant:?} in {rows:?}"))
}

#[test]
fn contention_oversells_only_without_a_shared_lock() {
    let rows = scenario("contention");
    assert_eq!(rows.len(), 14, "every strategy races");
    assert!(row(&rows, "naive", "").row.oversold > 0);
    assert!(row(&rows, "local-mutex", "").row.oversold > 0);
    for safe in [
        "redis-lock",
        "redis-lua",
        "db-atomic",
        "zookeeper",
        "segmented",
    ] {
        assert_eq!(row(&rows, safe, "").row.oversold, 0, "{safe}");
    }
}

#[test]
fn a_local_lock_holds_on_one_instance_only() {
    let rows = scenario("two-instances-local-lock");
    assert_eq!(row(&rows, "local-mutex", "instances=1").row.oversold, 0);
    assert!(row(&rows, "local-mutex", "instances=2").row.oversold > 0);
}

#[test]
fn expired_leases_oversell_and_the_fixes_do_not() {
    let rows = scenario("lease-expiry");
    for unsafe_lock in ["setnx-naive", "redis-lock", "db-lock-table"] {
        assert!(
            row(&rows, unsafe_lock, "").row.oversold > 0,
            "{unsafe_lock}"
        );
    }
    for safe in [
        "redisson",
        "fenced",
        "zookeeper",
        "db-pessimistic",
        "db-optimistic",
        "db-atomic",
    ] {
        assert_eq!(row(&rows, safe, "").row.oversold, 0, "{safe}");
    }
}

#[test]
fn a_frozen_holder_breaks_redisson_but_not_the_fence() {
    let rows = scenario("frozen-holder");
    assert_eq!(row(&rows, "redisson", "").row.oversold, 1);
    let fenced = &row(&rows, "fenced", "").row;
    assert_eq!((fenced.sold, fenced.oversold), (1, 0));
    assert_eq!(
        fenced.errors.get("busy"),
        Some(&1),
        "the stale write is refused"
    );
}

#[test]
fn every_lock_but_setnx_recovers_from_a_crashed_holder() {
    let rows = scenario("holder-crash");
    for recovering in [
        "redis-lock",
        "redisson",
        "fenced",
        "redlock",
        "zookeeper",
        "db-lock-table",
        "db-pessimistic",
    ] {
        let r = &row(&rows, recovering, "").row;
        assert_eq!((r.sold, r.oversold), (r.initial, 0), "{recovering}: {r:?}");
    }
    let stalled = &row(&rows, "setnx-naive", "").row;
    assert_eq!(stalled.sold, 0, "a lock without a TTL stalls the product");
}

#[test]
fn redlock_survives_a_minority_down_and_multilock_does_not() {
    let rows = scenario("redlock-minority-down");
    let majority = &row(&rows, "redlock", "quorum=majority").row;
    assert_eq!((majority.sold, majority.oversold), (majority.initial, 0));
    let all = &row(&rows, "redlock", "quorum=all").row;
    assert_eq!((all.sold, all.oversold), (0, 0));
}

#[test]
fn segments_scale_a_hot_lock() {
    let rows = scenario("segment-scaling");
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.row.oversold == 0));
}

#[test]
fn the_edge_counts_both_layers_429s_apart_from_sales() {
    let rows = scenario("rate-limit");
    assert_eq!(rows.len(), 2);
    for r in &rows {
        let errors = &r.row.errors;
        assert!(errors["rate_limited:gateway"] > 0, "{r:?}");
        assert!(errors["rate_limited:service"] > 0, "{r:?}");
        assert!(r.row.sold > 0, "{r:?}");
        assert_eq!(r.row.oversold, 0, "{r:?}");
    }
}
