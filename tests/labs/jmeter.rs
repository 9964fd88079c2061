//! The JMeter plans, run for real: `jmeter/run.sh` (JMeter 5.x, or
//! Debian's 2.13 through its launcher) runs `seckill-compare.jmx` against
//! a lab, and the results file must agree with the ledger, strategy by
//! strategy: successful samples == orders, the safe strategies oversold 0,
//! the unsafe ones more than 0.

use seckill_harness as harness;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use harness::TestLab;
use seckill::orders::ledger::Ledger;

/// Per sample label: (samples, successful samples).
fn tally(results: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut reader = csv::Reader::from_path(results).expect("results file");
    let headers = reader.headers().expect("header line").clone();
    let column = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no {name} column in {headers:?}"))
    };
    let (label, success) = (column("label"), column("success"));
    let mut tally = BTreeMap::new();
    for record in reader.records() {
        let record = record.expect("a results line");
        let entry: &mut (u64, u64) = tally.entry(record[label].to_owned()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(&record[success] == "true");
    }
    tally
}

/// `jmeter/strategies.csv`: (product, strategy) rows.
fn plan_strategies(root: &Path) -> Vec<(i64, String)> {
    let mut reader = csv::Reader::from_path(root.join("jmeter/strategies.csv")).expect("csv");
    reader
        .records()
        .map(|r| {
            let r = r.expect("row");
            (r[0].parse().expect("product id"), r[1].to_owned())
        })
        .collect()
}

/// One JMeter at a time: both tests time races (a burst of threads
/// against 50 ms of work), which two JVMs on two cores would blur.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `plan` (in jmeter/) through `jmeter/run.sh` against the lab's
/// gateway with `props`, in `dir`; returns the results file's tally.
fn run_plan(
    plan: &str,
    lab: &TestLab,
    dir: &Path,
    props: &[String],
) -> BTreeMap<String, (u64, u64)> {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let port = lab.info.gateway_url.rsplit(':').next().expect("port");
    let status = Command::new(root.join("jmeter/run.sh"))
        .current_dir(dir)
        .env("JMETER_LOG", dir.join("jmeter.log"))
        .arg("-t")
        .arg(root.join("jmeter").join(plan))
        .arg(format!("-Jport={port}"))
        .arg(format!("-Jtoken={}", lab.info.admin_token))
        .args(props)
        .arg("-l")
        .arg(dir.join("results.jtl"))
        .status()
        .expect("running jmeter/run.sh");
    assert!(status.success(), "jmeter/run.sh exited {status}");
    tally(&dir.join("results.jtl"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_plan_races_one_strategy() {
    single_plan_on(&TestLab::start(2), &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_single_plan_races_with_buyer_tokens() {
    let lab = TestLab::start_with(2, &["--buyer-auth", "token"], &[]);
    let key = lab.info.buyer_key_file.clone().expect("a key");
    let dir = tempfile::tempdir().expect("temp dir");
    let buyers = dir.path().join("tokens.csv");
    let printed = Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["tokens", "--users", "100", "--prefix", "jm-"])
        .arg("--key-file")
        .arg(&key)
        .output()
        .expect("seckill tokens");
    assert!(printed.status.success(), "{printed:?}");
    std::fs::write(&buyers, &printed.stdout).expect("written");
    single_plan_on(&lab, &[format!("-Jbuyers={}", buyers.display())]).await;
}

/// The single plan on `lab` (with `extra` properties): 100 buys of 50
/// units, every 200 one order, and its saved ledger the final one.
async fn single_plan_on(lab: &TestLab, extra: &[String]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger_file = dir.path().join("ledger.json");
    let mut props = vec![
        "-Jstrategy=redis-lua".to_owned(),
        "-Jproduct=9001".to_owned(),
        "-Jstock=50".to_owned(),
        "-Jthreads=20".to_owned(),
        "-Jloops=5".to_owned(),
        format!("-Jreport={}", ledger_file.display()),
    ];
    props.extend_from_slice(extra);
    let tally = run_plan("seckill-single.jmx", lab, dir.path(), &props);
    let ledger = lab.gateway().ledger(9001).await.expect("ledger");
    assert_eq!(tally["buy redis-lua"], (100, 50), "{tally:?}");
    assert_eq!((ledger.sold, ledger.oversold), (50, 0));
    let saved: Ledger =
        serde_json::from_str(&std::fs::read_to_string(&ledger_file).expect("saved ledger"))
            .expect("ledger json");
    // Saved by the tearDown: the final numbers (orders may still have been
    // on their way from the stream to PostgreSQL then; both are counted).
    assert_eq!(
        (saved.initial, saved.sold, saved.remaining, saved.oversold),
        (
            ledger.initial,
            ledger.sold,
            ledger.remaining,
            ledger.oversold
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compare_plan_runs_and_agrees_with_the_ledger() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lab = TestLab::start(2);
    let gateway = lab.gateway();
    let catalog = gateway.strategies().await.expect("strategies");
    let plan = plan_strategies(root);
    let mut planned: Vec<&str> = plan.iter().map(|(_, s)| s.as_str()).collect();
    let mut known: Vec<&str> = catalog.iter().map(|c| c.id.as_str()).collect();
    planned.sort_unstable();
    known.sort_unstable();
    assert_eq!(planned, known, "the plan covers every strategy once");

    let dir = tempfile::tempdir().expect("temp dir");
    let (threads, rounds) = (40u64, 2u64);
    let tally = run_plan(
        "seckill-compare.jmx",
        &lab,
        dir.path(),
        &[
            format!("-Jthreads={threads}"),
            format!("-Jrounds={rounds}"),
            // No -Jstrategy_count: the plan's default must be the CSV's
            // row count, as a user (and compose) runs it.
            format!("-Jreport={}", dir.path().join("report.json").display()),
        ],
    );
    let report: Vec<Ledger> = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("report.json")).expect("the saved report"),
    )
    .expect("report json");
    for (product, strategy) in &plan {
        let (samples, ok) = tally[&format!("buy {strategy}")];
        assert_eq!(samples, threads * rounds, "{strategy}: every buy sampled");
        assert_eq!(tally[&format!("reset {strategy}")], (1, 1), "{strategy}");
        // The tearDown's report and the ledger now agree with JMeter.
        let saved = report.iter().find(|l| l.id == *product).expect("in report");
        let ledger = gateway.ledger(*product).await.expect("ledger");
        assert_eq!(saved.sold, ledger.sold, "{strategy}: report vs ledger");
        assert_eq!(ok as i64, ledger.sold, "{strategy}: 200s vs orders");
        let safe = catalog
            .iter()
            .find(|c| &c.id == strategy)
            .expect("known")
            .safe;
        if safe {
            assert_eq!(ledger.oversold, 0, "{strategy} is safe: {ledger:?}");
        } else {
            assert!(ledger.oversold > 0, "{strategy} must oversell: {ledger:?}");
        }
        eprintln!(
            "{strategy:<16} samples {samples:>4} ok {ok:>4}  sold {:>4} oversold {:>4}",
            ledger.sold, ledger.oversold
        );
    }
}
