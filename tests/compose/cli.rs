//! `docker compose` and `docker`, run as a user runs them, against the
//! engine `scripts/compose-run.sh` started (DOCKER_HOST), with the pinned
//! Compose plugin (DOCKER_CONFIG), under a project name of this run's own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One compose project: its name, the files it reads and the environment
/// each command gets (the admin token and the host ports it publishes).
pub struct Compose {
    /// `-p`: containers, networks and volumes carry it, so the run finds
    /// (and removes) only its own.
    pub project: String,
    /// Extra `-f` files over docker-compose.yml (compose.token.yml).
    overrides: Vec<PathBuf>,
    /// Variables the compose file reads.
    env: Vec<(String, String)>,
}

impl Compose {
    /// A project on free host ports; panics unless an engine of the
    /// run's own is named by DOCKER_HOST.
    pub fn new(admin_token: &str, jmeter_results: &Path) -> Self {
        assert!(
            std::env::var("DOCKER_HOST").is_ok_and(|h| h.starts_with("unix:///")),
            "the compose run needs the engine scripts/compose-run.sh starts (DOCKER_HOST)"
        );
        let mut env = vec![
            ("SECKILL_ADMIN_TOKEN".to_owned(), admin_token.to_owned()),
            (
                "SECKILL_JMETER_RESULTS".to_owned(),
                jmeter_results.display().to_string(),
            ),
        ];
        for name in [
            "SECKILL_GATEWAY_PORT",
            "SECKILL_CLUSTER_GATEWAY_PORT",
            "SECKILL_PROMETHEUS_PORT",
            "SECKILL_GRAFANA_PORT",
        ] {
            env.push((
                name.to_owned(),
                seckill::lab::free_port().expect("a free port").to_string(),
            ));
        }
        Self {
            project: format!("seckill-run-{}", std::process::id()),
            overrides: Vec::new(),
            env,
        }
    }

    /// The value this project gives `name`.
    pub fn var(&self, name: &str) -> &str {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("{name} is not set"))
    }

    /// Sets `name` for the commands that follow.
    pub fn set(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// Adds a file (relative to the repository) over docker-compose.yml,
    /// or with `None` goes back to docker-compose.yml alone.
    pub fn overlay(&mut self, file: Option<&str>) {
        self.overrides = file.map(|f| Path::new(ROOT).join(f)).into_iter().collect();
    }

    /// The gateway's URL on the host port this project publishes.
    pub fn url(&self, port_var: &str) -> String {
        format!("http://127.0.0.1:{}", self.var(port_var))
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new("docker");
        command
            .arg("compose")
            .args(["-p", &self.project])
            .args(["--project-directory", ROOT])
            .arg("-f")
            .arg(Path::new(ROOT).join("docker-compose.yml"));
        for file in &self.overrides {
            command.arg("-f").arg(file);
        }
        command
            .args(args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        command
    }

    /// Runs `docker compose ARGS`; panics with its output (and the
    /// services' last log lines) when it fails. Returns its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let started = Instant::now();
        let output = self.command(args).output().expect("docker compose");
        eprintln!(
            "docker compose {} ({:.1} s)",
            args.join(" "),
            started.elapsed().as_secs_f64()
        );
        if !output.status.success() {
            let logs = self
                .command(&["--profile", "*", "logs", "--no-color", "--tail", "30"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            panic!(
                "docker compose {args:?} failed: {}\n{}\n--- logs ---\n{logs}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The containers of `service`, by id.
    pub fn containers(&self, service: &str) -> Vec<String> {
        self.run(&["ps", "-q", service])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Every container of the project (all profiles) as `docker compose
    /// ps --format json` describes it.
    pub fn ps(&self) -> Vec<Value> {
        self.run(&["--profile", "*", "ps", "--all", "--format", "json"])
            .lines()
            .map(|line| serde_json::from_str(line).expect("ps JSON"))
            .collect()
    }

    /// The address of `service`'s first container on the project's
    /// network: the host reaches it on Linux without a published port.
    pub fn address(&self, service: &str) -> String {
        let id = self.containers(service).into_iter().next().expect(service);
        docker(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &id,
        ])
        .trim()
        .to_owned()
    }

    /// What is left of the project in the engine: containers, networks
    /// and volumes that carry its label.
    pub fn leftovers(&self) -> Vec<String> {
        let label = format!("label=com.docker.compose.project={}", self.project);
        let mut left = Vec::new();
        for kind in [
            &["ps", "-a", "-q"][..],
            &["network", "ls", "-q"],
            &["volume", "ls", "-q"],
        ] {
            let mut args = kind.to_vec();
            args.extend(["--filter", &label]);
            left.extend(docker(&args).lines().map(|l| format!("{} {l}", kind[0])));
        }
        left
    }
}

/// A run that panics midway still takes its project down (on an engine
/// that outlives the run, a developer's, nothing is left behind).
impl Drop for Compose {
    fn drop(&mut self) {
        let _ = self
            .command(&["--profile", "*", "down", "-v", "--remove-orphans"])
            .output();
    }
}

/// Runs `docker ARGS` and returns its stdout; panics when it fails.
pub fn docker(args: &[&str]) -> String {
    let output = Command::new("docker").args(args).output().expect("docker");
    assert!(
        output.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Polls `check` every half second until it holds or `limit` passes.
pub async fn eventually(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
