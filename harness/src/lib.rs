//! The test harness: starts labs for the tests, gives them clients, and
//! races whose every row is checked. A crate of its own, which every test
//! binary links (docs/architecture.md says why).
//!
//! A lab is a `seckill lab --json` child process: it prints where
//! everything is on one line, and stops everything (and deletes its
//! directory) on SIGTERM or as soon as this test process is gone — even
//! when the process exits without running destructors, as the test harness
//! does with statics.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use seckill::lab::LabInfo;
use seckill::lab::client::Gateway;
use seckill::race::driver;
use seckill::race::driver::{Audit, RaceSpec, Row};
use seckill::stock::strategy::Catalogue;
use serde_json::Value;

/// A lab process and what it printed.
pub struct TestLab {
    /// Where everything is.
    pub info: LabInfo,
    child: Child,
}

impl TestLab {
    /// Starts a lab with `instances` instances and waits until it is ready.
    pub fn start(instances: usize) -> Self {
        Self::start_with(instances, &[], &[])
    }

    /// A lab with extra `seckill lab` flags and environment (which the
    /// instances inherit), e.g. tight rate limits.
    pub fn start_with(instances: usize, flags: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(seckill_binary())
            .args(["lab", "--json", "--instances", &instances.to_string()])
            .args(flags)
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning seckill lab");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("reading the lab's line");
        let info: LabInfo = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the lab did not start ({e}): {line:?}"));
        Self { info, child }
    }

    /// A client for the gateway.
    pub fn gateway(&self) -> Gateway {
        self.signing(
            Gateway::new(&self.info.gateway_url, &self.info.admin_token, 256).expect("client"),
        )
    }

    /// `target` with this lab's buyer-token key, when its instances take
    /// tokens.
    fn signing(&self, target: Gateway) -> Gateway {
        let key = self.info.buyer_key().expect("the lab's buyer key");
        target.with_buyer_key(key.as_ref())
    }

    /// The independent history check of this lab's races, against its
    /// PostgreSQL.
    pub fn audit(&self) -> Audit {
        audit_of(&self.info.postgres_url, Some(&self.info.mysql_url))
    }

    /// A client for one instance directly, bypassing nginx.
    pub fn instance(&self, index: usize) -> Gateway {
        self.signing(
            Gateway::new(&self.info.instances[index].url, &self.info.admin_token, 256)
                .expect("client"),
        )
    }
}

impl Drop for TestLab {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

/// The lab shared by every test of this binary (two instances).
pub fn shared() -> &'static TestLab {
    static LAB: OnceLock<TestLab> = OnceLock::new();
    LAB.get_or_init(|| TestLab::start(2))
}

/// A plain HTTP client for requests the driver does not make.
pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("client")
}

/// One raw buy at `base` as `user`, carrying `reservation` as
/// `X-Reservation` when given: status, `Retry-After` and the JSON body.
pub async fn raw_buy(
    base: &str,
    id: i64,
    user: &str,
    reservation: Option<&str>,
) -> (u16, Option<u64>, Value) {
    let mut request = http()
        .post(format!("{base}/stock/{id}/buy"))
        .header("X-User-Id", user);
    if let Some(token) = reservation {
        request = request.header("X-Reservation", token);
    }
    let response = request.send().await.expect("an answer");
    let status = response.status().as_u16();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    (status, retry_after, response.json().await.expect("JSON"))
}

/// One race a test runs, named field by field.
pub struct Race<'a> {
    /// The product raced (tests isolate their data by product id).
    pub product: i64,
    /// The strategy's id (its recipe or store, if any, go in
    /// `settings`).
    pub strategy: &'a str,
    /// Units on sale.
    pub stock: i64,
    /// Buyers, one unit each.
    pub buyers: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// Arrivals spread this far apart instead of one burst.
    pub pace: Option<Duration>,
    /// The product's settings, as a reset body writes them.
    pub settings: Value,
}

impl<'a> Race<'a> {
    /// The crowd most races are: 200 buyers, 50 in flight, on 20 units.
    pub fn crowd(product: i64, strategy: &'a str, settings: Value) -> Self {
        Self {
            product,
            strategy,
            stock: 20,
            buyers: 200,
            concurrency: 50,
            pace: None,
            settings,
        }
    }

    /// The race that makes `naive` oversell every time: 100 buyers at once
    /// on 10 units, 100 ms of work between its GET and SET, so every buyer
    /// arriving in that window reads the same stock.
    pub fn stampede(product: i64) -> Self {
        Self {
            product,
            strategy: "naive",
            stock: 10,
            buyers: 100,
            concurrency: 100,
            pace: None,
            settings: serde_json::json!({"work_ms": 100}),
        }
    }
}

/// Runs `race` on `target`; its history is checked by `audit`, and every
/// row is held to the ledger's promise before it is returned.
pub async fn race_on(audit: &Audit, target: &Gateway, race: Race<'_>) -> Row {
    // Tests write settings as JSON; the driver takes them typed, so a
    // misspelt knob fails here rather than racing under defaults.
    let settings = serde_json::from_value(race.settings).expect("valid settings");
    let spec = RaceSpec {
        product_id: race.product,
        strategy: race.strategy.to_owned(),
        stock: race.stock,
        buyers: race.buyers,
        concurrency: race.concurrency,
        pace: race.pace,
        settings,
        reserving: 0,
        payer: None,
    };
    let row = driver::race(target, &spec, audit).await.expect("race");
    eprintln!("{} {}: {row:?}", race.product, race.strategy);
    // The ledger's promise, checked on every race: each 200 a client saw
    // is exactly one recorded order, and every other order is a buyer
    // told `outcome_unknown` whose sale the history check found (on a
    // loaded machine a Redis reply can time out: seen once in CI, a
    // redis-lock race beside Chromium's screenshot, 99 200s and 1 unknown
    // that sold for 100 orders).
    assert_eq!(
        row.client_ok + row.unknown_sold,
        row.sold,
        "client 200s and unknowns that sold != recorded orders: {row:?}"
    );
    // And the independent check of every request against the orders: no
    // buyer was told anything but the truth (an oversell, expected of some
    // races, breaks only the safe strategies' rules).
    assert!(row.history_ok.is_some(), "the history was not checked");
    assert!(
        seckill::judge::check::truthful(&row.violations),
        "history check failed: {row:?}"
    );
    assert_eq!(row.history_ok, Some(row.violations.is_empty()), "{row:?}");
    row
}

/// The `seckill` binary of this build: beside the test binary's `deps`
/// directory, where cargo puts both (`cargo test` builds it for the
/// package's integration tests).
fn seckill_binary() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let dir = test
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    dir.join("seckill")
}

/// The independent history check of races whose orders are in the
/// PostgreSQL (and MariaDB) at these URLs, holding every safe strategy of
/// the catalogue to no oversell.
pub fn audit_of(postgres_url: &str, mysql_url: Option<&str>) -> Audit {
    let safe = Catalogue::new()
        .all()
        .filter(|s| s.info().safe)
        .map(|s| s.info().id.to_owned())
        .collect();
    Audit::connect_lazy(postgres_url, mysql_url, None, safe).expect("audit")
}

/// An instance outside the lab's gateway (reached at its own URL), on the
/// lab's backends, with `env` on top of the lab's instance environment
/// (e.g. [`seckill::lab::clock_off`]); killed when dropped.
pub struct Outside {
    /// Its base URL.
    pub url: String,
    child: Child,
}

impl Outside {
    /// Starts it as instance `name` of `lab` and waits until it is ready.
    pub async fn start(lab: &TestLab, name: &str, env: &[(String, String)]) -> Self {
        let port = seckill::lab::free_port().expect("a free port");
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(seckill_binary())
            .arg("serve")
            .envs(seckill::lab::instance_env(&lab.info, name, addr))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning seckill serve");
        let outside = Self {
            url: format!("http://{addr}"),
            child,
        };
        for _ in 0..200 {
            let ready = http().get(format!("{}/readyz", outside.url)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                return outside;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{name} was not ready within 10 s");
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Buyers who come back one at a time after a crowd, as clients told
/// `busy` would, until one is told `sold_out` (at most `most`; after a
/// `busy`, 100 ms later). A slow path's adaptive limit turns part of a
/// crowd away at once with nothing sold, so a race that must sell exactly
/// its stock sells the units they left to these. Returns how many bought;
/// panics on any other answer.
pub async fn come_back(target: &Gateway, product: i64, most: usize) -> i64 {
    use seckill::lab::client::BuyResult;
    let mut bought = 0;
    for again in 0..most {
        match target
            .buy(product, &format!("back-{product}-{again}"))
            .await
        {
            BuyResult::Ok => bought += 1,
            BuyResult::Failed(code) if code == "sold_out" => break,
            BuyResult::Failed(code) if code == "busy" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            BuyResult::Failed(code) => panic!("product {product}: a buyer coming back told {code}"),
        }
    }
    bought
}
