//! `seckill lab --observe`: Prometheus as people run it beside such a
//! demo, natively — Debian's `prometheus` scraping every instance's
//! `/metrics` and nginx's `stub_status` through Debian's
//! `prometheus-nginx-exporter`, each on a free loopback port. Compose's
//! `observe` profile runs the same scrape jobs (`monitoring/prometheus.yml`)
//! with Grafana and the dashboard in `monitoring/grafana/`.

use std::path::Path;

use super::find;
use super::process::Managed;

/// How often the lab's Prometheus scrapes: every second, so a race of a
/// few seconds is drawn as it happens (compose's scrapes every 5 s).
pub const SCRAPE_INTERVAL: &str = "1s";

/// The lab's scrape configuration: the instances (`host:port` each) as job
/// `seckill`, the exporter as job `nginx` — the job names compose's file
/// uses, so the dashboard's queries read both.
pub fn config(instances: &[String], exporter: &str) -> String {
    let targets = |list: &[String]| {
        list.iter()
            .map(|t| format!("'{t}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "# Written by `seckill lab --observe`; compose's twin is monitoring/prometheus.yml.\n\
         global:\n  scrape_interval: {SCRAPE_INTERVAL}\n  evaluation_interval: {SCRAPE_INTERVAL}\n\
         scrape_configs:\n\
         \x20 - job_name: seckill\n    static_configs:\n      - targets: [{}]\n\
         \x20 - job_name: nginx\n    static_configs:\n      - targets: [{}]\n",
        targets(instances),
        targets(&[exporter.to_owned()]),
    )
}

/// Starts the exporter on `port`, reading nginx's status page at
/// `status_url`.
pub fn start_exporter(dir: &Path, status_url: &str, port: u16) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let mut command = tokio::process::Command::new(find::in_path("prometheus-nginx-exporter")?);
    command
        .arg(format!("-nginx.scrape-uri={status_url}"))
        .arg(format!("-web.listen-address=127.0.0.1:{port}"));
    Managed::spawn("nginx-exporter", command, &dir.join("nginx-exporter.log"))
}

/// Writes `config` and starts Prometheus on `port`, its data under `dir`.
pub fn start_prometheus(dir: &Path, config: &str, port: u16) -> anyhow::Result<Managed> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join("prometheus.yml");
    std::fs::write(&file, config)?;
    let mut command = tokio::process::Command::new(find::in_path("prometheus")?);
    command
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.retention.time=1d")
        .arg("--log.level=warn");
    Managed::spawn("prometheus", command, &dir.join("prometheus.log"))
}
