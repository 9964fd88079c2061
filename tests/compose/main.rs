//! docker-compose.yml and `seckill lab` describe one topology: the same
//! services, the same environment for an instance, the same gateway
//! template variables, and ports that line up — checked here without an
//! engine. `run` brings the file up for real on an engine of its own
//! (`scripts/compose-run.sh`), which the static checks cannot replace.

mod cli;
mod run;

use seckill_harness as harness;

use std::collections::BTreeSet;
use std::net::SocketAddr;

use clap::CommandFactory;
use harness::TestLab;
use seckill::cli::Cli;
use serde_yaml_ng::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn compose() -> Value {
    let text = std::fs::read_to_string(format!("{ROOT}/docker-compose.yml")).expect("compose");
    let mut compose: Value = serde_yaml_ng::from_str(&text).expect("YAML");
    compose.apply_merge().expect("merge keys");
    compose
}

/// A service's environment keys (YAML aliases are resolved by the parser).
fn env_keys(service: &Value) -> BTreeSet<String> {
    service["environment"]
        .as_mapping()
        .expect("an environment mapping")
        .keys()
        .filter_map(|k| k.as_str().map(str::to_owned))
        .collect()
}

fn env_value(service: &Value, key: &str) -> String {
    let env = &service["environment"];
    env.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("{key} not set in {env:?}"))
}

/// Every environment variable `seckill serve` reads.
fn serve_env() -> BTreeSet<String> {
    let cli = Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve");
    serve
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .chain(["RUST_LOG".to_owned()])
        .collect()
}

/// The `observe` profile: Prometheus reads the repository's configuration,
/// Grafana its provisioning and dashboard, and the dashboard's data source
/// is the one provisioned.
#[test]
fn compose_observe_profile_mounts_the_repositorys_monitoring() {
    let compose = compose();
    let services = compose["services"].as_mapping().expect("services");
    for name in ["prometheus", "grafana", "nginx-exporter"] {
        let service = &services[name];
        assert_eq!(
            service["profiles"][0].as_str(),
            Some("observe"),
            "{name} is in the observe profile"
        );
        for volume in service["volumes"].as_sequence().into_iter().flatten() {
            let source = volume.as_str().expect("volume").split(':').next().unwrap();
            if let Some(path) = source.strip_prefix("./") {
                assert!(
                    std::path::Path::new(ROOT).join(path).exists(),
                    "{name} mounts {source}, which is not in the repository"
                );
            }
        }
    }
    let read = |path: &str| std::fs::read_to_string(format!("{ROOT}/{path}")).expect(path);
    let datasources: Value = serde_yaml_ng::from_str(&read(
        "monitoring/grafana/provisioning/datasources/prometheus.yml",
    ))
    .expect("YAML");
    let uid = datasources["datasources"][0]["uid"].as_str().expect("uid");
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("monitoring/grafana/dashboards/seckill.json")).expect("JSON");
    for panel in dashboard["panels"].as_array().expect("panels") {
        assert_eq!(panel["datasource"]["uid"], uid, "{}", panel["title"]);
    }
}

#[test]
fn compose_runs_the_services_the_lab_runs() {
    let lab = TestLab::start(1);
    let compose = compose();
    let services: BTreeSet<String> = compose["services"]
        .as_mapping()
        .expect("services")
        .iter()
        .filter(|(_, s)| s.get("profiles").is_none())
        .filter_map(|(name, _)| name.as_str().map(str::to_owned))
        .collect();
    // The lab's instances are compose's scaled `app` service.
    let lab_services: BTreeSet<String> = lab
        .info
        .processes
        .iter()
        .map(|p| {
            if p.name.starts_with("instance-") {
                "app".to_owned()
            } else {
                p.name.clone()
            }
        })
        .collect();
    assert_eq!(services, lab_services);
    for (name, service) in compose["services"].as_mapping().expect("services") {
        assert!(
            service.get("healthcheck").is_some() || service.get("profiles").is_some(),
            "{name:?} has no healthcheck"
        );
    }
}

#[test]
fn compose_gives_an_instance_what_the_lab_gives_it() {
    let compose = compose();
    let app = &compose["services"]["app"];
    let keys = env_keys(app);
    let lab_env = seckill::lab::instance_env(
        &seckill::lab::LabInfo::default(),
        "x",
        SocketAddr::from(([127, 0, 0, 1], 1)),
    );
    for (key, _) in lab_env {
        // Compose names each container by its host name instead.
        if key != "SECKILL_INSTANCE" {
            assert!(keys.contains(key), "compose's app lacks {key}");
        }
    }
    let readable = serve_env();
    for key in &keys {
        assert!(
            readable.contains(key),
            "compose sets {key}, which seckill serve never reads"
        );
    }
    // The RedLock masters and every backend host are compose services.
    let services = compose["services"].as_mapping().expect("services");
    for key in [
        "SECKILL_REDIS_URL",
        "SECKILL_REDLOCK_URLS",
        "SECKILL_DATABASE_URL",
        "SECKILL_ZOOKEEPER",
        "SECKILL_ETCD",
        "SECKILL_MYSQL_URL",
    ] {
        for url in env_value(app, key).split(',') {
            let host = url
                .rsplit('@')
                .next()
                .unwrap()
                .trim_start_matches("redis://");
            let host = host
                .split(':')
                .next()
                .unwrap()
                .trim_start_matches("postgres://");
            assert!(
                services.contains_key(host),
                "{key} names {host}, not a compose service"
            );
        }
    }
}

#[test]
fn compose_cluster_profile_runs_the_clustered_lab() {
    let lab = TestLab::start_with(1, &["--redis-cluster", "--cluster-replicas"], &[]);
    let compose = compose();
    let services = compose["services"].as_mapping().expect("services");
    let in_profile = |name: &str| {
        services
            .get(name)
            .and_then(|s| s.get("profiles"))
            .and_then(Value::as_sequence)
            .is_some_and(|p| p.iter().any(|p| p.as_str() == Some("cluster")))
    };
    // The lab's cluster nodes are the profile's, by name.
    let lab_nodes: BTreeSet<String> = lab
        .info
        .processes
        .iter()
        .filter(|p| p.name.starts_with("cluster-"))
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(lab_nodes.len(), 6, "{lab_nodes:?}");
    let compose_nodes: BTreeSet<String> = services
        .keys()
        .filter_map(Value::as_str)
        .filter(|name| name.starts_with("cluster-") && *name != "cluster-init")
        .map(str::to_owned)
        .collect();
    assert_eq!(lab_nodes, compose_nodes);
    for name in compose_nodes.iter().map(String::as_str).chain([
        "cluster-init",
        "app-cluster",
        "nginx-cluster",
    ]) {
        assert!(in_profile(name), "{name} is not in the cluster profile");
    }
    // A clustered instance gets what the lab gives one, and no fixed Redis.
    let app = &compose["services"]["app-cluster"];
    let keys = env_keys(app);
    for (key, _) in
        seckill::lab::instance_env(&lab.info, "x", SocketAddr::from(([127, 0, 0, 1], 1)))
    {
        if key != "SECKILL_INSTANCE" {
            assert!(keys.contains(key), "compose's app-cluster lacks {key}");
        }
    }
    assert!(!keys.contains("SECKILL_REDIS_URL"), "{keys:?}");
    let seeds = env_value(app, "SECKILL_REDIS_CLUSTER");
    let masters = lab.info.cluster.as_ref().expect("a cluster").masters.len();
    assert_eq!(seeds.split(',').count(), masters, "{seeds}");
    for seed in seeds.split(',') {
        let host = seed.split(':').next().unwrap();
        assert!(
            in_profile(host),
            "{seed} is not a cluster node of the profile"
        );
    }
    let gateway = &compose["services"]["nginx-cluster"];
    assert_eq!(
        env_value(gateway, "SECKILL_UPSTREAMS"),
        "server app-cluster:8000;"
    );
}

#[test]
fn the_gateway_template_gets_the_same_variables_and_ports_line_up() {
    let compose = compose();
    let template =
        std::fs::read_to_string(format!("{ROOT}/nginx/seckill.conf.template")).expect("template");
    let used: BTreeSet<String> = template
        .split("${")
        .skip(1)
        .filter_map(|rest| rest.split('}').next())
        .map(str::to_owned)
        .collect();
    let nginx = &compose["services"]["nginx"];
    assert_eq!(
        env_keys(nginx),
        used,
        "compose's nginx env vs the template's variables"
    );
    // The lab fills the same variables (src/lab/nginx.rs).
    for var in &used {
        assert!(
            seckill::lab::nginx::TEMPLATE.contains(&format!("${{{var}}}")),
            "{var}"
        );
    }

    // nginx listens where compose publishes it; its upstream is the port
    // the app listens on, which the Dockerfile exposes and the healthcheck
    // probes.
    let listen = env_value(nginx, "SECKILL_LISTEN");
    // "${SECKILL_GATEWAY_PORT:-8080}:8080": the host's port is the user's.
    let published = nginx["ports"][0].as_str().expect("a published port");
    assert_eq!(
        published,
        format!("${{SECKILL_GATEWAY_PORT:-8080}}:{listen}")
    );
    let app_listen = env_value(&compose["services"]["app"], "SECKILL_LISTEN")
        .rsplit(':')
        .next()
        .expect("port")
        .to_owned();
    let upstream = env_value(nginx, "SECKILL_UPSTREAMS");
    assert_eq!(upstream, format!("server app:{app_listen};"));
    let dockerfile = std::fs::read_to_string(format!("{ROOT}/Dockerfile")).expect("Dockerfile");
    assert!(dockerfile.contains(&format!("EXPOSE {app_listen}")));
    let probe = format!("{:?}", compose["services"]["app"]["healthcheck"]["test"]);
    assert!(
        probe.contains(&format!("/127.0.0.1/{app_listen}")),
        "{probe}"
    );
    // The JMeter service aims at the gateway's port.
    let jmeter = format!("{:?}", compose["services"]["jmeter"]["command"]);
    assert!(jmeter.contains(&format!("-Jport={listen}")), "{jmeter}");
    assert!(jmeter.contains("/plans/seckill-compare.jmx"), "{jmeter}");
}

/// Every Redis in compose persists as the lab's default (durable) does,
/// with the same flags.
/// A Redis service's command line, with the fsync policy at its default.
fn redis_command(compose: &Value, name: &str) -> Vec<String> {
    compose["services"][name]["command"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{name} has a command list"))
        .iter()
        .filter_map(|v| v.as_str())
        .map(|a| a.replace("${SECKILL_REDIS_FSYNC:-always}", "always"))
        .collect()
}

#[test]
fn compose_redis_persists_as_the_lab_does() {
    use seckill::lab::durability::{Durability, redis_args};
    let compose = compose();
    let expected = redis_args(Durability::default());
    for name in ["redis", "redis-2", "redis-3"] {
        let command = redis_command(&compose, name);
        assert_eq!(command[0], "redis-server", "{name}");
        assert_eq!(command[1..], expected[..], "{name}");
    }
    // The cluster profile's nodes: the lab's cluster flags, then the same.
    let timeout = seckill::lab::cluster::NODE_TIMEOUT.as_millis().to_string();
    let cluster = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        &timeout,
    ];
    for i in 1..=3 {
        for name in [format!("cluster-{i}"), format!("cluster-replica-{i}")] {
            let command = redis_command(&compose, &name);
            assert_eq!(command[0], "redis-server", "{name}");
            assert_eq!(command[1..7], cluster[..], "{name}");
            assert_eq!(command[7..], expected[..], "{name}");
        }
    }
}
