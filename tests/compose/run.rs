//! `docker compose up --build` for real, as the README tells a user to run
//! it, then everything the user does next: races through the gateway,
//! the JMeter profile, more replicas, a replica killed mid-race, Redis
//! restarted, the project taken down and up again, the cluster and
//! observe profiles, buyer tokens, and `down -v` leaving nothing behind.
//!
//! It needs a Docker engine of the run's own: `scripts/compose-run.sh`
//! starts one (and the images without a registry) and runs this test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use seckill::lab::client::Gateway;
use seckill::orders::ledger::Ledger;
use seckill::race::driver;
use seckill::race::driver::{Audit, RaceSpec};
use seckill_harness::{Race, come_back, race_on};
use serde_json::{Value, json};

use super::cli::{Compose, docker, eventually};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const GATEWAY: &str = "SECKILL_GATEWAY_PORT";
const CLUSTER_GATEWAY: &str = "SECKILL_CLUSTER_GATEWAY_PORT";

/// The project and what reaches into it from the host.
struct Run {
    compose: Compose,
    admin_token: String,
}

impl Run {
    fn gateway(&self, port_var: &str) -> Gateway {
        Gateway::new(&self.compose.url(port_var), &self.admin_token, 256).expect("client")
    }

    /// The history check against the project's own PostgreSQL and
    /// MariaDB, reached at their addresses on the project's network.
    fn audit(&self) -> Audit {
        let pg = self.compose.address("postgres");
        let mysql = self.compose.address("mysql");
        seckill_harness::audit_of(
            &format!("postgres://seckill:seckill@{pg}:5432/seckill"),
            Some(&format!("mysql://seckill:seckill@{mysql}:3306/seckill")),
        )
    }

    /// `served_by` of `n` buys of `product` by distinct buyers.
    async fn servers(&self, product: i64, n: usize, tag: &str) -> BTreeSet<String> {
        let gateway = self.gateway(GATEWAY);
        let mut seen = BTreeSet::new();
        for i in 0..n {
            let answer = gateway.answer(product, &format!("{tag}-{i}")).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            seen.insert(answer.served_by.expect("served_by"));
        }
        seen
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the Docker engine scripts/compose-run.sh starts"]
async fn compose_up_for_real() {
    // Kept after the run (under target/, which CI throws away): a failed
    // assertion names the files it read.
    let results = Path::new(ROOT).join(format!("target/compose-run/{}", std::process::id()));
    std::fs::create_dir_all(&results).expect("results dir");
    // At least 8 characters, as the service wants, whatever the pid (CI
    // once ran this as pid 391: "run-391" and both replicas refused it).
    let admin_token = format!("compose-run-{:08}", std::process::id());
    let mut run = Run {
        compose: Compose::new(&admin_token, &results),
        admin_token,
    };

    up_builds_and_every_service_is_healthy(&run);
    let audit = run.audit();
    races_give_the_labs_verdicts(&run, &audit).await;
    jmeter_profile_agrees_with_the_ledger(&run).await;
    scaled_replicas_all_serve(&run).await;
    a_killed_replica_loses_nothing_acknowledged(&run, &audit).await;
    a_restarted_redis_loses_nothing(&run, &audit).await;
    down_and_up_keeps_every_order(&run).await;
    cluster_profile_sells_on_three_masters(&run).await;
    observe_profile_scrapes_every_replica(&run).await;
    token_mode_end_to_end(&mut run).await;
    down_v_leaves_nothing(&run);
}

/// `up --build --wait`: the image builds from this tree and every service
/// of the default profile is running and healthy.
fn up_builds_and_every_service_is_healthy(run: &Run) {
    let started = Instant::now();
    run.compose
        .run(&["up", "--build", "--wait", "--quiet-pull"]);
    eprintln!(
        "up --build --wait: {:.0} s; seckill:latest {} MB",
        started.elapsed().as_secs_f64(),
        docker(&["image", "inspect", "-f", "{{.Size}}", "seckill:latest"])
            .trim()
            .parse::<u64>()
            .expect("size")
            / 1_000_000
    );
    let ps = run.compose.ps();
    let services: BTreeSet<&str> = ps.iter().filter_map(|c| c["Service"].as_str()).collect();
    for expected in [
        "nginx",
        "app",
        "redis",
        "redis-2",
        "redis-3",
        "zookeeper",
        "etcd",
        "postgres",
        "mysql",
    ] {
        assert!(services.contains(expected), "{expected}: {services:?}");
    }
    for container in &ps {
        assert_eq!(container["State"], "running", "{container}");
        assert_eq!(container["Health"], "healthy", "{container}");
    }
    assert_eq!(run.compose.containers("app").len(), 2, "two replicas");
}

/// The lab's verdicts through compose's gateway: the unsafe strategy
/// oversells, the safe ones sell exactly the stock, on every backend.
async fn races_give_the_labs_verdicts(run: &Run, audit: &Audit) {
    let gateway = run.gateway(GATEWAY);
    let naive = race_on(audit, &gateway, Race::stampede(101)).await;
    assert!(naive.oversold > 0, "naive must oversell: {naive:?}");
    let safe = [
        (102, "redis-lock", json!({"max_retries": 1000})),
        (103, "redis-lua", json!({})),
        (104, "db-atomic", json!({})),
        (105, "db-atomic", json!({"store": "mysql"})),
        (106, "zookeeper", json!({})),
        (107, "etcd", json!({})),
    ];
    for (product, strategy, settings) in safe {
        let row = race_on(audit, &gateway, Race::crowd(product, strategy, settings)).await;
        assert!(row.sold <= 20 && row.oversold == 0, "{strategy}: {row:?}");
        // Buyers turned away `busy` come back one at a time.
        let sold = row.sold + come_back(&gateway, product, 100).await;
        let ledger = gateway.ledger(product).await.expect("ledger");
        assert_eq!(
            (ledger.sold, sold, ledger.oversold, ledger.remaining),
            (20, 20, 0, 0),
            "{strategy}: {row:?} then {ledger:?}"
        );
        assert_eq!(row.history_ok, Some(true), "{strategy}: {row:?}");
    }
}

/// `--profile jmeter run --rm jmeter`: the plan runs against the gateway
/// and its saved report agrees with the ledger, product by product.
async fn jmeter_profile_agrees_with_the_ledger(run: &Run) {
    run.compose
        .run(&["--profile", "jmeter", "run", "--rm", "jmeter"]);
    let dir = Path::new(run.compose.var("SECKILL_JMETER_RESULTS"));
    let report: Vec<Ledger> = serde_json::from_str(
        &std::fs::read_to_string(dir.join("report.json")).expect("the plan's report.json"),
    )
    .expect("report JSON");
    let answers = answers(&dir.join("results.jtl"));
    let gateway = run.gateway(GATEWAY);
    let catalog = gateway.strategies().await.expect("strategies");
    let plan = std::fs::read_to_string(format!("{ROOT}/jmeter/strategies.csv")).expect("csv");
    for line in plan.lines().skip(1) {
        let (product, strategy) = line.split_once(',').expect("row");
        let strategy = strategy.split(',').next().expect("strategy");
        let product: i64 = product.parse().expect("id");
        let saved = report.iter().find(|l| l.id == product).expect("in report");
        let ledger = driver::drained_ledger(&gateway, product)
            .await
            .expect("ledger");
        assert_eq!(saved.sold, ledger.sold, "{strategy}: report vs ledger");
        let codes = answers
            .get(&format!("buy {strategy}"))
            .cloned()
            .unwrap_or_default();
        // Each 200 is an order; each order is a 200 or an answer that may
        // hide a sale (502/503/504: the JTL keeps no body to tell
        // `outcome_unknown` from `busy`; or no HTTP answer at all).
        let ok = codes.get("200").copied().unwrap_or(0) as i64;
        let unknown: u64 = codes
            .iter()
            .filter(|(code, _)| !code.starts_with('2') && !code.starts_with('4'))
            .map(|(_, n)| n)
            .sum();
        assert!(
            ok <= ledger.sold && ledger.sold <= ok + unknown as i64,
            "{strategy}: JMeter's 200s {ok} vs {} orders; its answers by code: {codes:?} (in {})",
            ledger.sold,
            dir.display()
        );
        let safe = catalog
            .iter()
            .find(|c| c.id == strategy)
            .expect("known")
            .safe;
        if safe {
            assert_eq!(ledger.oversold, 0, "{strategy}: {ledger:?}");
        } else {
            assert!(ledger.oversold > 0, "{strategy} must oversell: {ledger:?}");
        }
    }
}

/// Samples per label and response code in a JMeter CSV results file.
fn answers(jtl: &Path) -> BTreeMap<String, BTreeMap<String, u64>> {
    let mut reader = csv::Reader::from_path(jtl).expect("results.jtl");
    let headers = reader.headers().expect("header").clone();
    let col = |name: &str| headers.iter().position(|h| h == name).expect(name);
    let (label, code) = (col("label"), col("responseCode"));
    let mut answers: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for record in reader.records() {
        let record = record.expect("line");
        let codes = answers.entry(record[label].to_owned()).or_default();
        *codes.entry(record[code].to_owned()).or_default() += 1;
    }
    answers
}

/// `--scale app=4`: nginx resolved `app` when it started, so the two new
/// replicas get no traffic until it resolves again; a reload (what the
/// README tells) makes all four serve.
async fn scaled_replicas_all_serve(run: &Run) {
    let gateway = run.gateway(GATEWAY);
    driver::reset(&gateway, 120, "redis-lua", 10_000, Default::default())
        .await
        .expect("reset");
    run.compose
        .run(&["up", "--wait", "--no-recreate", "--scale", "app=4"]);
    assert_eq!(run.compose.containers("app").len(), 4);
    let before = run.servers(120, 40, "scale-before").await;
    eprintln!("after --scale app=4, before a reload: {before:?}");
    assert_eq!(before.len(), 2, "nginx resolved app once: {before:?}");
    run.compose
        .run(&["exec", "-T", "nginx", "nginx", "-s", "reload"]);
    let mut seen = BTreeSet::new();
    eventually(
        Duration::from_secs(20),
        "all four replicas serve",
        async || {
            seen.extend(run.servers(120, 40, "scale-after").await);
            seen.len() == 4
        },
    )
    .await;
}

/// `docker kill` of one replica mid-race, at full load (as the lab's
/// `instance-kill` scenario): every 200 is an order, and the buyers the
/// dead replica left without an answer (nginx's 502) are unknowns, each
/// either sold or not — the history check holds them to that.
async fn a_killed_replica_loses_nothing_acknowledged(run: &Run, audit: &Audit) {
    let gateway = run.gateway(GATEWAY);
    let spec = RaceSpec {
        product_id: 121,
        strategy: "db-atomic".to_owned(),
        stock: 1500,
        buyers: 3000,
        concurrency: 32,
        pace: None,
        settings: Default::default(),
        reserving: 0,
        payer: None,
    };
    let victim = run.compose.containers("app").pop().expect("a replica");
    let race = tokio::spawn({
        let audit = audit.clone();
        async move { driver::race(&gateway, &spec, &audit).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!race.is_finished(), "the kill must land mid-race");
    docker(&["kill", &victim]);
    let row = race.await.expect("joined").expect("race");
    eprintln!("a replica killed mid-race: {row:?}");
    assert!(row.client_ok <= row.sold && row.sold <= 1500, "{row:?}");
    assert_eq!(
        row.sold - row.client_ok,
        row.unknown_sold,
        "orders beyond the 200s are unknowns that sold: {row:?}"
    );
    assert_eq!(row.history_ok, Some(true), "{row:?}");
}

/// `docker compose restart redis` under the durable default (appendfsync
/// always): every acknowledged order and the stock come back.
async fn a_restarted_redis_loses_nothing(run: &Run, audit: &Audit) {
    let gateway = run.gateway(GATEWAY);
    let row = race_on(
        audit,
        &gateway,
        Race {
            stock: 100,
            buyers: 150,
            ..Race::crowd(122, "redis-lua", json!({}))
        },
    )
    .await;
    // Half the stock left on the counter, whose value must survive too.
    driver::reset(&gateway, 123, "redis-lua", 50, Default::default())
        .await
        .expect("reset");
    let mut sold_before = 0;
    for i in 0..20 {
        sold_before += i64::from(gateway.answer(123, &format!("pre-{i}")).await.status == 200);
    }
    run.compose.run(&["restart", "redis"]);
    run.compose.run(&["up", "--wait", "--no-recreate"]);
    let after = driver::drained_ledger(&gateway, 122).await.expect("ledger");
    assert_eq!(after.sold, row.sold, "{after:?}");
    let counter = driver::drained_ledger(&gateway, 123).await.expect("ledger");
    assert_eq!(
        (counter.sold, counter.remaining),
        (sold_before, 50 - sold_before),
        "{counter:?}"
    );
    // And it sells again.
    let mut sold_after = 0;
    for i in 0..5 {
        sold_after += i64::from(gateway.answer(123, &format!("post-{i}")).await.status == 200);
    }
    assert_eq!(sold_after, 5);
}

/// `down` then `up` with the volumes kept: every product's ledger is as
/// it was.
async fn down_and_up_keeps_every_order(run: &Run) {
    let url = format!("{}/report", run.compose.url(GATEWAY));
    let report = async || {
        let rows: Vec<Ledger> = seckill_harness::http()
            .get(&url)
            .send()
            .await
            .expect("GET /report")
            .json()
            .await
            .expect("the report");
        rows.into_iter()
            .map(|l| (l.id, (l.initial, l.sold, l.remaining)))
            .collect::<BTreeMap<_, _>>()
    };
    // Every order out of the streams first, so both reports count the same
    // place.
    for id in report().await.keys() {
        driver::drained_ledger(&run.gateway(GATEWAY), *id)
            .await
            .expect("drained");
    }
    let before = report().await;
    assert!(before.len() >= 20, "{before:?}");
    run.compose.run(&["down"]);
    run.compose.run(&["up", "--wait"]);
    let after = report().await;
    assert_eq!(after, before);
}

/// `--profile cluster`: the cluster gateway sells exactly the stock of a
/// segmented product whose keys sit on the three masters.
async fn cluster_profile_sells_on_three_masters(run: &Run) {
    run.compose.run(&["--profile", "cluster", "up", "--wait"]);
    let pg = run.compose.address("postgres");
    let audit = Audit::connect_lazy(
        &format!("postgres://seckill:seckill@{pg}:5432/seckill"),
        None,
        None,
        vec!["segmented".to_owned()],
    )
    .expect("audit");
    let gateway = run.gateway(CLUSTER_GATEWAY);
    let row = race_on(
        &audit,
        &gateway,
        Race {
            stock: 60,
            buyers: 300,
            ..Race::crowd(130, "segmented", json!({"segments": 6}))
        },
    )
    .await;
    assert_eq!((row.sold, row.oversold), (60, 0), "{row:?}");
    let placement = gateway
        .ledger(130)
        .await
        .expect("ledger")
        .placement
        .expect("a placement");
    let masters: BTreeSet<_> = placement.iter().filter_map(|p| p.master.clone()).collect();
    assert_eq!(masters.len(), 3, "{placement:?}");
}

/// `--profile observe` (Prometheus and the exporter; Grafana has no
/// Debian package and is left out): every app replica and the exporter
/// are scraped.
async fn observe_profile_scrapes_every_replica(run: &Run) {
    run.compose.run(&[
        "--profile",
        "observe",
        "up",
        "--wait",
        "prometheus",
        "nginx-exporter",
    ]);
    let replicas = run.compose.containers("app").len();
    let url = format!(
        "{}/api/v1/targets",
        run.compose.url("SECKILL_PROMETHEUS_PORT")
    );
    let client = seckill_harness::http();
    eventually(Duration::from_secs(60), "every target up", async || {
        let Ok(answer) = client.get(&url).send().await else {
            return false;
        };
        let Ok(targets) = answer.json::<Value>().await else {
            return false;
        };
        let up = |job: &str| {
            targets["data"]["activeTargets"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| t["labels"]["job"] == job && t["health"] == "up")
                .count()
        };
        up("seckill") == replicas && up("nginx") == 1
    })
    .await;
}

/// Buyer tokens end to end: compose.token.yml mounts a key, a buyer
/// without a token is refused, `seckill tokens` signs buyers that buy,
/// and a race in token mode gives the verdicts of header mode.
async fn token_mode_end_to_end(run: &mut Run) {
    let dir = tempfile::tempdir().expect("temp dir");
    let key_file = dir.path().join("buyer.key");
    let key = seckill::instance::auth::token::Key::generate();
    key.save(&key_file).expect("key");
    // The image's user (uid 10001) reads it through the bind mount.
    std::fs::set_permissions(
        &key_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .expect("chmod");
    run.compose
        .set("SECKILL_BUYER_KEY", &key_file.display().to_string());
    run.compose.overlay(Some("compose.token.yml"));
    run.compose.run(&["up", "--wait"]);

    let url = run.compose.url(GATEWAY);
    let (status, _, body) = seckill_harness::raw_buy(&url, 103, "mallory", None).await;
    assert_eq!(status, 401, "{body}");

    let tokens = std::process::Command::new(env!("CARGO_BIN_EXE_seckill"))
        .args(["tokens", "--users", "3", "--key-file"])
        .arg(&key_file)
        .output()
        .expect("seckill tokens");
    assert!(tokens.status.success(), "{tokens:?}");
    let gateway = run.gateway(GATEWAY);
    driver::reset(&gateway, 140, "redis-lua", 10, Default::default())
        .await
        .expect("reset");
    let text = String::from_utf8(tokens.stdout).expect("utf-8");
    // One `user,token` line per buyer, no header (what the JMeter plans
    // read as their buyers CSV).
    assert_eq!(text.lines().count(), 3, "{text}");
    for line in text.lines() {
        let (user, token) = line.split_once(',').expect("user,token");
        let answer = seckill_harness::http()
            .post(format!("{url}/stock/140/buy"))
            .bearer_auth(token)
            .header("X-User-Id", "someone-else")
            .send()
            .await
            .expect("answer");
        assert_eq!(answer.status(), 200, "{user}");
    }
    assert_eq!(gateway.ledger(140).await.expect("ledger").sold, 3);

    let signing = gateway.with_buyer_key(Some(&key));
    let audit = run.audit();
    let naive = race_on(&audit, &signing, Race::stampede(141)).await;
    assert!(naive.oversold > 0, "{naive:?}");
    let lua = race_on(&audit, &signing, Race::crowd(142, "redis-lua", json!({}))).await;
    assert_eq!((lua.sold, lua.oversold), (20, 0), "{lua:?}");
}

/// `down -v` over every profile leaves no container, network or volume.
fn down_v_leaves_nothing(run: &Run) {
    run.compose
        .run(&["--profile", "*", "down", "-v", "--remove-orphans"]);
    let left = run.compose.leftovers();
    assert!(left.is_empty(), "left behind: {left:?}");
}
