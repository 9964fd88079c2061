//! The reference client: `wrk` (a Debian package) run against the same
//! gateway, so the bench's own client can be held to it — its HTTP-path
//! figure against wrk's, and a strategy's ratio to the HTTP path against
//! the same ratio under wrk. Two threads, as many connections as the
//! bench keeps in flight, a warm-up run first; a buy is a new buyer per
//! request (a Lua script numbers them per thread).

use std::time::Duration;

use anyhow::Context;
use tokio::process::Command;

/// Whether wrk is installed.
pub fn installed() -> bool {
    std::process::Command::new("wrk")
        .arg("--version")
        .output()
        .is_ok()
}

/// What to send: `GET /healthz`, or buys of a product.
#[derive(Debug, Clone, Copy)]
pub enum Load {
    /// The HTTP path alone.
    Health,
    /// `POST /stock/{id}/buy`, a new buyer each time.
    Buys(i64),
}

/// Requests per second wrk measured against `base` over `duration`,
/// after a warm-up run of `warmup`, `n` connections.
pub async fn rate(
    base: &str,
    load: Load,
    n: usize,
    (warmup, duration): (Duration, Duration),
) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("load.lua");
    std::fs::write(&script, lua(load))?;
    if !warmup.is_zero() {
        run(base, &script, n, warmup).await?;
    }
    let out = run(base, &script, n, duration).await?;
    requests_per_sec(&out).with_context(|| format!("wrk said:\n{out}"))
}

async fn run(
    base: &str,
    script: &std::path::Path,
    n: usize,
    duration: Duration,
) -> anyhow::Result<String> {
    let secs = duration.as_secs().max(1);
    let output = Command::new("wrk")
        .args(["-t2", &format!("-c{}", n.max(2)), &format!("-d{secs}s")])
        .args(["--timeout", "10s", "-s"])
        .arg(script)
        .arg(base)
        .output()
        .await
        .context("running wrk")?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    anyhow::ensure!(
        output.status.success(),
        "wrk failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(text)
}

/// The Lua script of `load`: each thread numbers its buyers, under a
/// prefix of its own and of this run.
fn lua(load: Load) -> String {
    match load {
        Load::Health => "wrk.method = \"GET\"\nwrk.path = \"/healthz\"\n".to_owned(),
        Load::Buys(product) => format!(
            r#"local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end
local n = 0
function request()
  n = n + 1
  return wrk.format("POST", "/stock/{product}/buy",
    {{["X-User-Id"] = "wrk-{run:08x}-" .. id .. "-" .. n}})
end
"#,
            run = rand::random::<u32>()
        ),
    }
}

/// The `Requests/sec:` line of wrk's report.
fn requests_per_sec(report: &str) -> Option<f64> {
    report
        .lines()
        .find_map(|line| line.trim().strip_prefix("Requests/sec:"))
        .and_then(|rate| rate.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_read_from_wrks_report() {
        let report = "Running 5s test @ http://127.0.0.1:1/\n  2 threads and 64 connections\n\
                      Requests/sec:  41234.56\nTransfer/sec:      5.12MB\n";
        assert_eq!(requests_per_sec(report), Some(41234.56));
        assert_eq!(requests_per_sec("nothing"), None);
    }

    #[test]
    fn every_buyer_is_new() {
        let script = lua(Load::Buys(7));
        assert!(script.contains("/stock/7/buy"), "{script}");
        assert!(script.contains(r#"id .. "-" .. n"#), "{script}");
    }
}
