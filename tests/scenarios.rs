//! Every named scenario, run the way users run it (`seckill race
//! --scenario NAME --out FILE`), each starting its own lab and injecting
//! its fault. The binary's exit code says whether every expectation was
//! met; the rows are checked here too, so a wrong expectation cannot pass
//! silently.
//!
//! Scenarios run one at a time (a process-wide lock): each brings up a
//! whole topology, and the timing faults (freeze for longer than a lease)
//! should not compete with another lab for two cores.

use std::process::Command;
use std::sync::Mutex;

use seckill::model::info::{Expect, Hazard};
use seckill::model::product::StoreKind;
use seckill::race::scenario::{
    ADDED, GOODPUT_MIN, HOT_MIN, LOCK_AND_STORE, LOCK_ONLY, MIN_SPEEDUP, PATIENCE, RESET_STOCK,
    SPREAD_MAX, ScenarioRow,
};
use seckill::stock::strategy::Catalogue;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs a scenario with small knobs and returns its rows.
fn scenario(name: &str) -> Vec<ScenarioRow> {
    scenario_with(name, &[])
}

/// The same, with more flags for `seckill race`.
fn scenario_with(name: &str, flags: &[&str]) -> Vec<ScenarioRow> {
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
        .args(flags)
        .args(["--concurrency", "50", "--out"])
        .arg(out.path())
        .arg("--report")
        .arg(page.path())
        .status()
        .expect("running seckill race");
    let rows: Vec<ScenarioRow> =
        serde_json::from_str(&std::fs::read_to_string(out.path()).expect("json")).expect("rows");
    for row in &rows {
        assert!(row.met, "{name}: expectation not met: {row:?}");
        // Every order is a 200 or an unknown outcome that sold; every 200
        // has its order unless a fault destroyed it, which the history
        // check names.
        let r = &row.row;
        let lost = violation(row, "ok_without_order") as i64;
        assert_eq!(r.client_ok + r.unknown_sold - lost, r.sold, "{row:?}");
        assert!(r.history_ok.is_some(), "history not checked: {row:?}");
        assert!(
            seckill::judge::check::UNIVERSAL
                .iter()
                .all(|rule| *rule == "ok_without_order" || violation(row, rule) == 0),
            "{row:?}"
        );
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
/// expectation (both charts and the table).
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
                r#"data-initial="{}" data-kept="{}" data-given-back="{}" data-oversold="{}""#,
                r.initial,
                r.kept,
                r.life.as_ref().map_or(0, |life| life.returned),
                r.oversold
            )),
            "{row:?}"
        );
    }
    // A mark per row in the wide chart, the phone's chart and the table.
    assert_eq!(page.matches('✓').count(), 3 * rows.len(), "every row met");
}

/// How often the history check found `rule` broken in `row`.
fn violation(row: &ScenarioRow, rule: &str) -> u64 {
    row.row.violations.get(rule).copied().unwrap_or(0)
}

fn row<'a>(rows: &'a [ScenarioRow], strategy: &str, variant: &str) -> &'a ScenarioRow {
    rows.iter()
        .find(|r| r.row.strategy == strategy && r.variant == variant)
        .unwrap_or_else(|| panic!("no row {strategy} {variant:?} in {rows:?}"))
}

/// The strategies the catalogue declares under `hazard`, with what each
/// should do there: the test's list, so a new strategy is checked too.
fn under(hazard: Hazard) -> Vec<(&'static str, Expect)> {
    Catalogue::new()
        .infos()
        .into_iter()
        .filter_map(|info| Some((info.id, info.expect(hazard)?)))
        .collect()
}

/// The scenario's key number, checked here from the row's own counts
/// (not from the scenario's `met`).
fn assert_key_number(row: &ScenarioRow, expect: Expect) {
    let r = &row.row;
    match expect {
        Expect::Oversells => assert!(r.oversold > 0, "must oversell: {row:?}"),
        Expect::NoOversell => assert_eq!(r.oversold, 0, "{row:?}"),
        Expect::SellsAll => assert_eq!((r.sold, r.oversold), (r.initial, 0), "{row:?}"),
        Expect::Stalls => assert_eq!(r.sold, 0, "a stalled product sells nothing: {row:?}"),
        Expect::Throttled | Expect::OpensOnTime => {
            unreachable!("no strategy declares {expect:?}: the scenario chooses it")
        }
    }
}

/// Every strategy the catalogue declares under `hazard` has a row, with
/// its key number.
fn assert_every_declared(rows: &[ScenarioRow], hazard: Hazard) {
    let declared = under(hazard);
    assert!(!declared.is_empty(), "no strategy declares {hazard:?}");
    for (strategy, expect) in declared {
        assert_key_number(row(rows, strategy, ""), expect);
    }
}

#[test]
fn contention_oversells_only_without_a_shared_lock() {
    let rows = scenario("contention");
    assert_eq!(
        rows.len(),
        Catalogue::new().ids().len(),
        "every strategy races"
    );
    assert_every_declared(&rows, Hazard::Contention);
    for info in Catalogue::new().infos().iter().filter(|i| i.safe) {
        assert_eq!(row(&rows, info.id, "").row.oversold, 0, "{}", info.id);
    }
}

#[test]
fn on_a_redis_cluster_every_strategy_keeps_its_verdict() {
    let rows = scenario_with("contention", &["--redis-cluster", "3"]);
    assert_eq!(rows.len(), Catalogue::new().ids().len());
    assert_every_declared(&rows, Hazard::Contention);
}

#[test]
fn a_local_lock_holds_on_one_instance_only() {
    let rows = scenario("two-instances-local-lock");
    for (strategy, on_two) in under(Hazard::SecondInstance) {
        assert_key_number(row(&rows, strategy, "instances=1"), Expect::SellsAll);
        assert_key_number(row(&rows, strategy, "instances=2"), on_two);
    }
}

#[test]
fn expired_leases_oversell_and_the_fixes_do_not() {
    let rows = scenario("lease-expiry");
    assert_every_declared(&rows, Hazard::LeaseExpiry);
}

#[test]
fn a_frozen_holder_breaks_redisson_but_not_the_fence() {
    let rows = scenario("frozen-holder");
    assert_every_declared(&rows, Hazard::FrozenHolder);
    for (strategy, expect) in under(Hazard::FrozenHolder) {
        let r = &row(&rows, strategy, "").row;
        match expect {
            // Two buyers, one unit: both sold.
            Expect::Oversells => assert_eq!(r.oversold, 1, "{r:?}"),
            // One sold; the other was refused: the resumed holder's stale
            // write (fenced: `busy`) or the buyer that queued on the row
            // lock (`sold_out`).
            _ => {
                assert_eq!((r.sold, r.oversold), (1, 0), "{r:?}");
                let refused = r.errors.get("busy").or(r.errors.get("sold_out"));
                assert_eq!(refused, Some(&1), "{r:?}");
            }
        }
    }
}

#[test]
fn every_lock_but_setnx_recovers_from_a_crashed_holder() {
    let rows = scenario("holder-crash");
    assert_every_declared(&rows, Hazard::HolderCrash);
}

#[test]
fn redlock_survives_a_minority_down_and_multilock_does_not() {
    let rows = scenario("redlock-minority-down");
    for (strategy, expect) in under(Hazard::MinorityDown) {
        assert_key_number(row(&rows, strategy, "quorum=majority"), expect);
        let all = &row(&rows, strategy, "quorum=all").row;
        assert_eq!((all.sold, all.oversold), (0, 0), "{all:?}");
    }
}

#[test]
fn segments_scale_a_hot_lock() {
    let rows = scenario("segment-scaling");
    assert_eq!(rows.len(), 5);
    assert!(rows.iter().all(|r| r.row.oversold == 0), "{rows:?}");
    // The speed-up as a ratio of two rows of the same run.
    let one = row(&rows, "segmented", "segments=1").row.rps;
    let eight = row(&rows, "segmented", "segments=8").row.rps;
    assert!(
        eight >= MIN_SPEEDUP * one,
        "8 segments: {eight:.0} rps, 1 segment: {one:.0} rps"
    );
}

#[test]
fn an_instance_whose_clock_runs_ahead_sells_nothing_before_the_opening() {
    let rows = scenario("clock-skew");
    assert_eq!(rows.len(), 4, "{rows:?}");
    for r in &rows {
        let opening = r.row.opening.as_ref().expect("a sale window");
        assert_eq!(opening.sold_early, 0, "sold before the opening: {r:?}");
        assert!(opening.early > 0, "nobody came early: {r:?}");
        assert_eq!((r.row.sold, r.row.oversold), (r.row.initial, 0), "{r:?}");
        assert!(r.met, "{r:?}");
    }
    assert!(rows.iter().any(|r| r.variant.contains("+60s")), "{rows:?}");
}

#[test]
fn stock_added_mid_race_sells_exactly_once_under_every_safe_strategy_and_store() {
    let rows = scenario("restock");
    let catalogue = Catalogue::new();
    let safe: Vec<_> = catalogue
        .all()
        .map(|s| s.info())
        .filter(|info| info.safe)
        .collect();
    let mut sellers: Vec<String> = safe
        .iter()
        .flat_map(|info| {
            info.stores
                .iter()
                .map(move |store| format!("{}@{}", info.id, store.as_str()))
        })
        .collect();
    // Then the Redis ones again, on a Redis Cluster.
    sellers.extend(
        safe.iter()
            .filter(|info| info.stores.contains(&StoreKind::Redis))
            .map(|info| format!("{}@redis-cluster", info.id)),
    );
    let raced: Vec<&str> = rows.iter().map(|r| r.variant.as_str()).collect();
    assert_eq!(
        raced, sellers,
        "every safe strategy on every store it takes, and on a cluster"
    );
    for r in &rows {
        let row = &r.row;
        assert_eq!(
            row.initial,
            RESET_STOCK + ADDED,
            "each addition once: {r:?}"
        );
        assert_eq!((row.sold, row.oversold), (row.initial, 0), "{r:?}");
        assert_eq!(row.history_ok, Some(true), "{r:?}");
    }
}

#[test]
fn a_slowed_backend_keeps_its_goodput_with_the_guards_and_loses_it_without() {
    let rows = scenario("backend-slowdown");
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        let slow = r.slowdown.as_ref().expect("the slowdown's numbers");
        assert_eq!(r.row.oversold, 0, "{r:?}");
        if slow.guarded {
            assert!(slow.goodput >= GOODPUT_MIN * slow.capacity, "{r:?}");
            assert!(slow.p99_ms < PATIENCE.as_millis() as f64, "{r:?}");
        }
    }
    // The piled-up path: without the guards its buyers wait past their
    // patience while the backend sells to nobody.
    let off = row(&rows, "db-atomic", "guards off, +40ms each way");
    let slow = off.slowdown.as_ref().expect("numbers");
    assert!(slow.goodput < GOODPUT_MIN * slow.capacity, "{off:?}");
    assert!(slow.wasted > 0 && slow.gave_up > 0, "{off:?}");
    // The control: a pipelined Redis only adds latency; the limit stays
    // where it started.
    let lua = row(&rows, "redis-lua", "guards on, +40ms each way");
    let slow = lua.slowdown.as_ref().expect("numbers");
    assert_eq!(slow.refused, 0, "{lua:?}");
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

#[test]
fn a_redis_crash_loses_acknowledged_sales_only_if_redis_answered_before_writing() {
    let rows = scenario("redis-crash");
    for r in &rows {
        // Reconciliation after the race leaves every counter at its truth;
        // without persistence it had a whole stock to put back.
        let reconciled = r.reconciled.as_ref().expect("reconciled after the race");
        assert_eq!(
            reconciled.drift_after.unwrap_or(reconciled.drift),
            0,
            "{r:?}"
        );
        if r.variant == "none" {
            assert_eq!(reconciled.drift, -r.row.initial, "{r:?}");
        }
        let lost = violation(r, "ok_without_order");
        match r.variant.as_str() {
            "aof-always" => {
                assert_eq!(lost, 0, "{r:?}");
                assert_eq!((r.row.sold, r.row.oversold), (r.row.initial, 0), "{r:?}");
                assert_eq!(violation(r, "duplicate_unit"), 0, "{r:?}");
            }
            // Only while a background fsync runs (slow-disk makes it
            // certain); on this disk usually nothing.
            "aof-everysec" => {
                assert!(lost <= 10, "{r:?}");
                assert!(violation(r, "duplicate_unit") <= lost, "{r:?}");
                assert_eq!(r.row.oversold, 0, "{r:?}");
            }
            "none" => {
                // The ten sales before the crash were in Redis alone.
                assert_eq!(lost, 10, "{r:?}");
                assert_eq!((r.row.sold, r.row.oversold), (0, 0), "{r:?}");
                assert_eq!(violation(r, "duplicate_unit"), 0, "{r:?}");
            }
            other => panic!("unexpected variant {other}: {r:?}"),
        }
    }
    assert_eq!(rows.len() % 3, 0, "three variants per strategy: {rows:?}");
}

#[test]
fn a_slow_disk_makes_everysec_lose_acknowledged_sales_and_always_none() {
    let rows = scenario("slow-disk");
    let (mut everysec, mut always) = (0, 0);
    for r in &rows {
        let lost = violation(r, "ok_without_order");
        match r.variant.as_str() {
            // Every sale of the first wave was told sold, and is gone.
            "aof-everysec" => {
                everysec += 1;
                assert_eq!(lost, 10, "{r:?}");
                assert_eq!(r.row.client_ok, 30, "{r:?}");
            }
            "aof-always" => {
                always += 1;
                assert_eq!(lost, 0, "{r:?}");
                assert_eq!(violation(r, "duplicate_unit"), 0, "{r:?}");
                assert_eq!(r.row.client_ok, r.row.initial, "{r:?}");
            }
            other => panic!("unexpected variant {other}: {r:?}"),
        }
        assert_eq!((r.row.sold, r.row.oversold), (r.row.initial, 0), "{r:?}");
    }
    assert!(everysec >= 3 && always >= 2, "{rows:?}");
}

#[test]
fn a_power_cut_loses_no_acknowledged_sale_under_the_durable_default() {
    let rows = scenario("power-cut");
    let stores = ["redis", "postgres", "mysql"];
    for r in &rows {
        let (mode, store) = r.variant.split_once('@').expect("mode@store");
        assert!(stores.contains(&store), "{r:?}");
        let cut = r.cut.as_ref().expect("the cut's outcome");
        assert_eq!(cut.recoveries.len(), 7, "every server restarted: {r:?}");
        let lost = violation(r, "ok_without_order");
        match mode {
            "durable" => {
                assert_eq!(lost, 0, "{r:?}");
                assert_eq!(violation(r, "duplicate_unit"), 0, "{r:?}");
                assert_eq!((r.row.sold, r.row.oversold), (r.row.initial, 0), "{r:?}");
                assert!(cut.recoveries.iter().all(|s| s.came_back), "{r:?}");
                assert!(cut.resumed_ms.is_some(), "sold again after the cut: {r:?}");
            }
            "relaxed" => assert!(cut.recoveries.iter().all(|s| s.came_back), "{r:?}"),
            "fast" => {}
            other => panic!("unexpected mode {other}: {r:?}"),
        }
    }
    // Every safe strategy, on every store it takes, in each of the modes.
    let durable = rows.iter().filter(|r| r.variant.starts_with("durable@"));
    assert!(durable.count() >= 25, "{rows:?}");
    assert_eq!(rows.len() % 3, 0, "{rows:?}");
}

#[test]
fn a_postgres_restart_is_reported_honestly_and_recovered_from() {
    let rows = scenario("pg-restart");
    for r in &rows {
        assert_eq!((r.row.sold, r.row.oversold), (r.row.initial, 0), "{r:?}");
        assert_eq!(r.row.history_ok, Some(true), "{r:?}");
    }
    // The outage was felt, and said as it was: refused before anything was
    // sent, or unknown.
    let told: u64 = rows
        .iter()
        .flat_map(|r| ["unavailable", "outcome_unknown"].map(|c| r.row.errors.get(c)))
        .flatten()
        .sum();
    assert!(told > 0, "{rows:?}");
}

#[test]
fn the_same_transaction_oversells_on_innodb_only() {
    let rows = scenario("repeatable-read");
    let declared = under(Hazard::RepeatableRead);
    assert!(
        declared.iter().any(|(_, e)| *e == Expect::Oversells),
        "some strategy shows InnoDB's lost update"
    );
    assert_eq!(rows.len(), 2 * declared.len());
    for (strategy, on_innodb) in declared {
        assert_key_number(row(&rows, strategy, "store=postgres"), Expect::SellsAll);
        assert_key_number(row(&rows, strategy, "store=mysql"), on_innodb);
    }
    for r in &rows {
        assert!(r.met, "{r:?}");
    }
}

#[test]
fn a_killed_instance_leaves_unknowns_but_no_lie_and_no_replay() {
    let rows = scenario("instance-kill");
    assert_eq!(rows.len(), 2);
    for r in &rows {
        assert!(r.row.unknown > 0, "the kill hit buys in flight: {r:?}");
        assert_eq!(violation(r, "replayed"), 0, "{r:?}");
        assert_eq!(r.row.history_ok, Some(true), "{r:?}");
        assert_eq!(r.row.oversold, 0, "{r:?}");
    }
}

#[test]
fn every_safe_strategy_holds_in_every_repeated_race() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let repeat = 3;
    let status = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["race", "--repeat", &repeat.to_string()])
        .args(["--stock", "20", "--buyers", "100", "--concurrency", "20"])
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("running seckill race --repeat");
    assert!(status.success(), "seckill race --repeat exited {status}");
    let rows: Vec<seckill::race::driver::Row> =
        serde_json::from_str(&std::fs::read_to_string(out.path()).expect("json")).expect("rows");
    // Every safe strategy, each of its recipes as `id:recipe`, and a
    // database strategy on each other database it takes as `id@store`.
    let databases = [StoreKind::Postgres, StoreKind::Mysql];
    let safe: Vec<String> = seckill::model::info::entries()
        .iter()
        .filter(|i| i.safe)
        .flat_map(|i| {
            let recipes = i
                .recipes
                .iter()
                .map(move |r| format!("{}:{}", i.id, r.as_str()));
            let stores = i
                .stores
                .iter()
                .filter(move |s| databases.contains(&i.store) && databases.contains(s))
                .filter(move |s| **s != i.store)
                .map(move |s| format!("{}@{}", i.id, s.as_str()));
            std::iter::once(i.id.to_owned())
                .chain(recipes)
                .chain(stores)
        })
        .collect();
    assert!(safe.iter().any(|l| l == "zookeeper:read-write"), "{safe:?}");
    assert!(safe.iter().any(|l| l == "db-atomic@mysql"), "{safe:?}");
    assert_eq!(rows.len(), repeat * safe.len(), "{rows:?}");
    for id in safe {
        let races: Vec<_> = rows.iter().filter(|r| r.strategy == id).collect();
        assert_eq!(races.len(), repeat, "{id}");
        for r in races {
            assert_eq!(r.oversold, 0, "{r:?}");
            assert_eq!(r.history_ok, Some(true), "{r:?}");
        }
    }
}

#[test]
fn a_partition_breaks_what_cannot_renew_and_its_late_write_every_unfenced_lock() {
    let rows = scenario("partition");
    let variants = [
        (Hazard::Partition, LOCK_ONLY),
        (Hazard::PartitionWithStore, LOCK_AND_STORE),
    ];
    let mut declared = 0;
    for (hazard, variant) in variants {
        let strategies = under(hazard);
        assert!(!strategies.is_empty(), "no strategy declares {hazard:?}");
        declared += strategies.len();
        for (strategy, expect) in strategies {
            let r = row(&rows, strategy, variant);
            assert_key_number(r, expect);
            // Two buyers, one unit: both sold, or exactly one did.
            let sold = if expect == Expect::Oversells { 2 } else { 1 };
            assert_eq!(r.row.sold, sold, "{r:?}");
        }
    }
    assert_eq!(rows.len(), declared, "one row per declaration");
    // A write sent into the partition: its buyer is told 503
    // outcome_unknown (Redis gives up waiting) or waits for the heal
    // (PostgreSQL does not), and what the partition held lands when it
    // heals — a sale unless a newer fencing token refused it.
    for r in rows.iter().filter(|r| r.variant == LOCK_AND_STORE) {
        assert!(r.row.errors.keys().all(|k| k == "outcome_unknown"), "{r:?}");
        let unknown = r.row.errors.get("outcome_unknown").copied().unwrap_or(0) as i64;
        let landed = if r.row.oversold > 0 { unknown } else { 0 };
        assert_eq!(r.row.unknown_sold, landed, "{r:?}");
    }
}

#[test]
fn a_failover_loses_a_single_redis_lock_but_not_redlock() {
    let rows = scenario("redis-failover");
    assert_every_declared(&rows, Hazard::Failover);
    for (strategy, expect) in under(Hazard::Failover) {
        let r = &row(&rows, strategy, "").row;
        match expect {
            // One unit: the holder and the second buyer both sold it.
            Expect::Oversells => assert_eq!((r.sold, r.oversold), (2, 1), "{r:?}"),
            // The second buyer could not take the lock; the holder sold.
            _ => {
                assert_eq!((r.sold, r.oversold), (1, 0), "{r:?}");
                assert_eq!(
                    r.errors.get("busy"),
                    Some(&1),
                    "second buyer refused: {r:?}"
                );
            }
        }
    }
}

#[test]
fn a_cluster_spreads_segments_and_products_but_not_one_hot_key() {
    let rows = scenario("cluster-spread");
    let busiest = |r: &ScenarioRow| r.masters.iter().map(|m| m.share).fold(0.0, f64::max);
    for r in &rows {
        assert_eq!(r.masters.len(), 3, "{r:?}");
        // A sale is one XADD on the master of its place.
        let sales: u64 = r.masters.iter().map(|m| m.sales).sum();
        assert_eq!(sales as i64, r.row.sold, "{r:?}");
        assert_eq!(r.row.sold, r.row.initial, "{r:?}");
    }
    let hot = row(&rows, "redis-lua", "hot key");
    assert!(busiest(hot) >= HOT_MIN, "{hot:?}");
    assert_eq!(hot.masters.iter().filter(|m| m.sales > 0).count(), 1);
    for (strategy, variant) in [("segmented", "segments=6"), ("redis-lua", "12 products")] {
        let spread = row(&rows, strategy, variant);
        assert!(busiest(spread) <= SPREAD_MAX, "{spread:?}");
        assert!(spread.masters.iter().all(|m| m.sales > 0), "{spread:?}");
    }
}

#[test]
fn a_cluster_failover_loses_nothing_unless_the_master_dies_ahead_of_its_replica_and_reconciliation_repairs_that()
 {
    let rows = scenario("cluster-failover");
    let safe_in_redis: Vec<&str> = Catalogue::new()
        .infos()
        .into_iter()
        .filter(|i| i.safe && i.store == seckill::model::product::StoreKind::Redis)
        .map(|i| i.id)
        .collect();
    for strategy in &safe_in_redis {
        let coordinated = row(&rows, strategy, "cluster-failover");
        assert_key_number(coordinated, Expect::SellsAll);
        assert_eq!(violation(coordinated, "ok_without_order"), 0);
        // The killed master took the first wave's decrements with it: the
        // promoted replica sold those units again, and no order was lost.
        let killed = row(&rows, strategy, "sigkill");
        assert!(killed.row.oversold > 0, "{killed:?}");
        assert_eq!(violation(killed, "ok_without_order"), 0, "{killed:?}");
        // Reconciliation saw them coming: the counter was above its truth
        // by exactly the units then sold twice.
        let found = killed.reconciled.as_ref().map(|d| d.drift);
        assert_eq!(found, Some(killed.row.oversold), "{killed:?}");
        // Repaired before the second wave, nothing sells twice.
        let repaired = row(&rows, strategy, "sigkill, reconciled");
        let drift = repaired.reconciled.as_ref().expect("a reconciliation");
        assert!(
            drift.drift > 0 && drift.drift_after == Some(0),
            "{repaired:?}"
        );
        assert_eq!(repaired.row.oversold, 0, "{repaired:?}");
        assert_eq!(violation(repaired, "ok_without_order"), 0, "{repaired:?}");
    }
    // A holder inside its section when the master dies: what the
    // catalogue declares for a failover, as on Sentinel.
    for (strategy, expect) in under(Hazard::Failover) {
        assert_key_number(row(&rows, strategy, "sigkill, lock held"), expect);
    }
}

#[test]
fn the_bench_measures_every_figure_against_its_baselines() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let status = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["bench", "--strategies", "redis-group,db-group"])
        // The shortest windows: the figures' values are the bench's
        // business, not this test's (it checks their shape).
        .args([
            "--duration-secs",
            "1",
            "--warmup-secs",
            "0",
            "--concurrency",
            "16",
        ])
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("running seckill bench");
    assert!(status.success(), "seckill bench exited {status}");
    let rows: Vec<seckill::race::bench::BenchRow> =
        serde_json::from_str(&std::fs::read_to_string(out.path()).expect("json")).expect("rows");
    let names: Vec<(&str, Option<u32>)> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.per_user_limit))
        .collect();
    assert_eq!(
        names,
        [
            ("http", None),
            ("redis", None),
            ("postgres", None),
            ("sold-out", None),
            ("sold-out keyed", None),
            ("redis-group", Some(0)),
            ("redis-group", Some(1)),
            ("db-group", Some(0)),
            ("db-group", Some(1)),
            // wrk's (scripts/deps.sh installs it): its ratios over its own
            // HTTP path.
            ("http (wrk)", None),
            ("redis-group (wrk)", Some(1)),
            ("db-group (wrk)", Some(1)),
        ]
    );
    let (own, by_wrk) = rows.split_at(9);
    for r in by_wrk {
        assert!(r.ops_per_sec > 0.0, "{r:?}");
        let ratio = r.ops_per_sec / by_wrk[0].ops_per_sec;
        assert!((r.vs_http - ratio).abs() < 0.02, "{r:?}");
        if r.per_user_limit.is_some() {
            assert_eq!(r.oversold, Some(0), "{r:?}");
        }
    }
    assert!(rows[..5].iter().all(|r| r.mean_group.is_none()), "{rows:?}");
    // Keyed or not, a sold-out product answers `sold_out` and nothing else.
    for sold_out in &rows[3..5] {
        assert_eq!(sold_out.ok_per_sec, 0.0, "{sold_out:?}");
        assert_eq!(
            sold_out.errors.keys().collect::<Vec<_>>(),
            ["sold_out"],
            "{sold_out:?}"
        );
    }
    let http = rows[0].ops_per_sec;
    for r in own {
        assert!(r.ops_per_sec > 0.0, "{r:?}");
        // Each ratio is the figure over the same run's baseline.
        let ratio = r.ops_per_sec / http;
        assert!((r.vs_http - ratio).abs() < 0.02, "{r:?} vs http {http}");
        if r.per_user_limit.is_some() {
            // Both strategies group their buyers, and the instances'
            // /metrics say how big the groups were.
            assert!(r.mean_group.is_some_and(|g| g >= 1.0), "{r:?}");
            assert_eq!(r.history_ok, Some(true), "{r:?}");
            assert_eq!(r.oversold, Some(0), "{r:?}");
            assert!(r.ok_per_sec > 0.0, "it sold: {r:?}");
        }
    }
    // Where each figure's CPU went, per operation, by process group: the
    // processes each figure works are busy, the client always.
    let cpu = |r: &seckill::race::bench::BenchRow, group: &str| r.cpu_us.get(group).copied();
    let busy = [
        ("http", &["client", "nginx", "instances"][..]),
        ("redis", &["client", "redis"]),
        ("postgres", &["client", "postgres"]),
        ("redis-group", &["client", "nginx", "instances", "redis"]),
        ("db-group", &["client", "nginx", "instances", "postgres"]),
    ];
    for (name, groups) in busy {
        let r = rows.iter().find(|r| r.name == name).expect("a figure");
        for group in groups {
            assert!(cpu(r, group).is_some_and(|us| us > 0.0), "{group}: {r:?}");
        }
    }
    // Redis alone runs no HTTP: nginx and the instances did next to
    // nothing per operation there.
    let redis = &rows[1];
    assert!(cpu(redis, "nginx").is_some_and(|us| us < 1.0), "{redis:?}");
}

/// The give-back mechanism of an order-life row (its variant's tail).
fn giveback(row: &ScenarioRow) -> &str {
    row.variant.rsplit('/').next().unwrap_or_default()
}

#[test]
fn a_late_payment_oversells_under_the_naive_job_and_nowhere_else() {
    let rows = scenario("late-payment");
    assert_eq!(rows.len(), 9, "three mechanisms on three stores: {rows:?}");
    for r in &rows {
        let life = r.row.life.as_ref().expect("order-life columns");
        if giveback(r) == "naive-cron" {
            assert!(r.row.oversold > 0 && life.paid_and_returned > 0, "{r:?}");
        } else {
            assert_eq!(
                (r.row.oversold, life.paid_and_returned, life.stranded),
                (0, 0, 0),
                "{r:?}"
            );
            assert!(
                life.pays_expired > 0,
                "no late payer was told expired: {r:?}"
            );
            assert_eq!(r.row.history_ok, Some(true), "{r:?}");
        }
    }
}

#[test]
fn a_dead_reaper_sells_twice_or_is_taken_over_by_its_mechanism() {
    let rows = scenario("reaper-crash");
    assert_eq!(rows.len(), 9, "three mechanisms on three stores: {rows:?}");
    for r in &rows {
        let life = r.row.life.as_ref().expect("order-life columns");
        match giveback(r) {
            "naive-cron" => assert!(r.row.oversold > 0, "{r:?}"),
            // The next reaper finishes the dead one's expired holds.
            "state-machine" | "delay-queue" => {
                assert_eq!((r.row.oversold, life.stranded), (0, 0), "{r:?}");
                assert_eq!(life.returned, r.row.initial, "{r:?}");
                assert_eq!((life.owed, life.drift), (0, 0), "{r:?}");
            }
            other => panic!("unexpected mechanism {other}: {r:?}"),
        }
    }
}

#[test]
fn abandoned_carts_cycle_the_stock_until_every_unit_is_paid() {
    let rows = scenario("abandoned-carts");
    assert_eq!(rows.len(), 6, "two mechanisms on three stores: {rows:?}");
    for r in &rows {
        let life = r.row.life.as_ref().expect("order-life columns");
        assert_eq!(
            (life.paid, life.stranded, r.row.oversold),
            (r.row.initial, 0, 0),
            "{r:?}"
        );
        assert!(life.returned > 0 && life.all_paid_ms.is_some(), "{r:?}");
        assert_eq!(r.row.history_ok, Some(true), "{r:?}");
    }
}

#[test]
fn a_paused_or_closed_sale_sells_to_nobody_sent_after_the_answer_and_loses_nothing() {
    let rows = scenario("pause-resume");
    assert_eq!(rows.len(), 6, "{rows:?}");
    for r in &rows {
        let window = r.window.as_ref().expect("the stretches");
        assert!(window.operator_ok, "{r:?}");
        assert_eq!((window.sold_paused, window.sold_closed), (0, 0), "{r:?}");
        assert!(
            window.refused_paused > 0 && window.refused_closed > 0,
            "{r:?}"
        );
        assert!(window.sold_open > 0 && window.sold_resumed > 0, "{r:?}");
        assert_eq!(r.row.oversold, 0, "{r:?}");
        assert_eq!(r.row.history_ok, Some(true), "{r:?}");
    }
    // Holds made before the close are paid after it.
    let held = rows
        .iter()
        .find(|r| r.variant.ends_with("+holds"))
        .expect("a row with holds");
    let window = held.window.as_ref().expect("the stretches");
    assert_eq!(
        window.paid_after_close as i64, held.row.client_ok,
        "{held:?}"
    );
}

#[test]
fn the_guards_cost_is_measured_on_two_instances_of_one_run() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::NamedTempFile::new().expect("temp file");
    // The bench itself refuses a lab whose two instances do not differ
    // by the guards (their /config); the values are the bench's business.
    let status = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["bench", "--guards", "--strategies", "redis-lua,db-atomic"])
        .args(["--duration-secs", "2", "--concurrency", "16"])
        .arg("--out")
        .arg(out.path())
        .status()
        .expect("running seckill bench --guards");
    assert!(status.success(), "seckill bench --guards exited {status}");
    let rows: Vec<seckill::race::bench::guards::GuardsRow> =
        serde_json::from_str(&std::fs::read_to_string(out.path()).expect("json")).expect("rows");
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["redis-lua", "db-atomic"]);
    for r in &rows {
        assert!(
            r.on_sales_per_sec > 0.0 && r.off_sales_per_sec > 0.0,
            "{r:?}"
        );
        assert!(r.health_on > 0.0 && r.health_off > 0.0, "{r:?}");
        let ratio = (r.on_sales_per_sec / r.off_sales_per_sec) / (r.health_on / r.health_off);
        assert!((r.ratio - ratio).abs() < 0.01, "{r:?}");
        assert!(r.on_cpu_us > 0.0 && r.off_cpu_us > 0.0, "{r:?}");
        assert_eq!(r.history_ok, Some(true), "{r:?}");
        assert_eq!(r.oversold, 0, "{r:?}");
    }
}
