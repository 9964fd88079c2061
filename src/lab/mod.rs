//! `seckill lab`: the whole topology, natively, on free loopback ports in a
//! temporary directory — Redis (plus two more masters for RedLock),
//! PostgreSQL, MariaDB, ZooKeeper, etcd, N instances of this binary and nginx in front.
//! It can also stop, kill, freeze and resume any process it owns: the
//! failure scenarios need that. The integration tests use the same code (through the
//! `seckill lab --json` subprocess), so what is tested is what users run.

pub mod client;
pub mod cluster;
pub mod disk;
pub mod durability;
mod etcd;
mod find;
pub mod links;
mod mysql;
pub mod nginx;
mod observe;
mod ports;
mod postgres;
pub mod powercut;
pub mod process;
pub mod proxy;
pub mod redis;
pub mod sentinel;
mod zookeeper;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use rand::Rng;
use serde::{Deserialize, Serialize};
use tokio::process::Command;

use crate::instance::auth::BuyerAuth;
use crate::instance::auth::token::Key;

pub use ports::free_port;

use durability::Durability;
use links::{Backend, LinkInfo, Links};
use powercut::PowerCutFs;
use process::Managed;
use proxy::Mode;

/// The lab's shape: the flags of every command that starts a lab
/// (`seckill lab`, `race` without `--url`, `bench`), declared once and
/// flattened into each, so that they mean and read the same everywhere.
#[derive(Debug, Clone, clap::Args)]
pub struct LabShape {
    /// Number of `seckill serve` instances behind nginx (in `seckill lab`,
    /// 0: the backends only, without instances or gateway).
    #[arg(long, env = "SECKILL_LAB_INSTANCES", default_value_t = 2)]
    pub instances: usize,
    /// How the servers keep their data: `durable` (every acknowledged
    /// write fsynced first; what compose runs), `relaxed` (fsynced about
    /// once a second) or `fast` (nothing reaches the disk); see
    /// [`durability`].
    #[arg(long, env = "SECKILL_LAB_DURABILITY", value_enum, default_value_t)]
    pub durability: Durability,
    /// How the instances identify buyers. With `token`, the lab makes the
    /// buyer-token key and names its file (`buyer_key_file` in `seckill
    /// lab --json`), and the load sends every buyer a token signed with it,
    /// as a login would hand out (`seckill tokens --key-file F` signs them
    /// by hand).
    #[arg(long, env = "SECKILL_BUYER_AUTH", value_enum, default_value_t)]
    pub buyer_auth: BuyerAuth,
}

impl LabShape {
    /// `instances` instances, durable, buyers by header: what the
    /// scenarios start unless they say otherwise.
    pub fn with_instances(instances: usize) -> Self {
        Self {
            instances,
            durability: Durability::default(),
            buyer_auth: BuyerAuth::default(),
        }
    }
}

/// What to start.
#[derive(Debug, Clone, clap::Args)]
pub struct LabArgs {
    /// Instances, persistence, buyer identity.
    #[command(flatten)]
    pub shape: LabShape,
    /// Gateway port (default: a free one).
    #[arg(long, env = "SECKILL_LAB_GATEWAY_PORT")]
    pub gateway_port: Option<u16>,
    /// Admin token (default: a random one, printed).
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Print one JSON line describing the topology instead of prose (for
    /// scripts and the test harness).
    #[arg(long)]
    pub json: bool,
    /// nginx's limits. The instances' own limits come from the usual
    /// `SECKILL_RATE_PER_SEC`… variables, which they inherit.
    #[command(flatten)]
    pub gateway: nginx::GatewayLimits,
    /// Put a fault proxy on every link between an instance and a backend
    /// (the `partition` scenario cuts one instance off from one backend
    /// through them); `--json` says where each is.
    #[arg(long, env = "SECKILL_LAB_PROXIED")]
    pub proxied: bool,
    /// Extra environment for the instances only (a scenario tightening
    /// their limits without touching its own process).
    #[arg(skip)]
    pub instance_env: Vec<(String, String)>,
    /// Extra environment for one instance, by name (`instance-b`), on top
    /// of `instance_env`: two instances of one lab set up differently, on
    /// the same backends (`backend-slowdown`'s guards on and off).
    #[arg(skip)]
    pub instance_env_of: Vec<(String, String, String)>,
    /// Start the main Redis as a master with a replica watched by three
    /// Sentinels, found by the instances through the sentinels, so that a
    /// failover can be staged (see [`sentinel`]).
    #[arg(long, env = "SECKILL_LAB_REDIS_SENTINEL")]
    pub redis_sentinel: bool,
    /// Run the instances' Redis as a Redis Cluster of this many masters
    /// (3 when the flag has no value; see [`cluster`]). The three plain
    /// Redis servers stay, as RedLock's independent masters.
    #[arg(
        long,
        env = "SECKILL_LAB_REDIS_CLUSTER",
        num_args = 0..=1,
        default_missing_value = "3",
        conflicts_with = "redis_sentinel"
    )]
    pub redis_cluster: Option<usize>,
    /// With `--redis-cluster`: one replica per master, so that a master
    /// can fail over.
    #[arg(long, env = "SECKILL_LAB_CLUSTER_REPLICAS", requires = "redis_cluster")]
    pub cluster_replicas: bool,
    /// Put every server's data directory on a power-cut filesystem
    /// ([`powercut`]), so that [`Lab::power_cut`] can stage a crash of
    /// the machine and [`Lab::slow_fsync`] a slow disk (needs /dev/fuse
    /// and root).
    #[arg(
        long,
        env = "SECKILL_LAB_POWER_CUT_FS",
        conflicts_with_all = ["redis_sentinel", "redis_cluster"]
    )]
    pub power_cut_fs: bool,
    /// Also start Prometheus scraping every instance and nginx (through
    /// prometheus-nginx-exporter), and print its URL.
    #[arg(long, env = "SECKILL_LAB_OBSERVE")]
    pub observe: bool,
}

impl LabArgs {
    /// `instances` instances behind nginx with its default limits, a random
    /// admin token and the prose report: what `seckill race` and the
    /// scenarios start (a scenario may tighten the limits).
    pub fn with_instances(instances: usize) -> Self {
        Self::with_shape(LabShape::with_instances(instances))
    }

    /// A lab of `shape`, otherwise as [`LabArgs::with_instances`].
    pub fn with_shape(shape: LabShape) -> Self {
        Self {
            shape,
            gateway_port: None,
            admin_token: None,
            json: false,
            gateway: nginx::GatewayLimits::default(),
            proxied: false,
            instance_env: Vec::new(),
            instance_env_of: Vec::new(),
            redis_sentinel: false,
            redis_cluster: None,
            cluster_replicas: false,
            power_cut_fs: false,
            observe: false,
        }
    }
}

/// The environment the lab gives an instance: what docker-compose.yml must
/// give its `app` service too (a test compares the two).
pub fn instance_env(info: &LabInfo, name: &str, listen: SocketAddr) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("SECKILL_LISTEN", listen.to_string()),
        ("SECKILL_INSTANCE", name.to_owned()),
        ("SECKILL_REDIS_URL", info.redis_url.clone()),
        ("SECKILL_DATABASE_URL", info.postgres_url.clone()),
        ("SECKILL_REDLOCK_URLS", info.redlock_urls.join(",")),
        ("SECKILL_ZOOKEEPER", info.zookeeper.clone()),
        ("SECKILL_ETCD", info.etcd.clone()),
        ("SECKILL_MYSQL_URL", info.mysql_url.clone()),
        ("SECKILL_ADMIN_TOKEN", info.admin_token.clone()),
        ("SECKILL_BUYER_AUTH", info.buyer_auth.as_str().to_owned()),
    ];
    if let Some(key) = &info.buyer_key_file {
        env.push(("SECKILL_BUYER_KEY_FILE", key.display().to_string()));
    }
    if let Some(topology) = &info.sentinel {
        // The master of the moment, from the sentinels, instead.
        env.retain(|(key, _)| *key != "SECKILL_REDIS_URL");
        env.push(("SECKILL_REDIS_SENTINELS", topology.sentinels.join(",")));
        env.push(("SECKILL_REDIS_MASTER_NAME", topology.master_name.clone()));
    }
    if let Some(cluster) = &info.cluster {
        env.retain(|(key, _)| *key != "SECKILL_REDIS_URL");
        env.push(("SECKILL_REDIS_CLUSTER", cluster.masters.join(",")));
    }
    env
}

/// The environment that runs a process with its clock `offset` off
/// (libfaketime's syntax, e.g. `+60s`): libfaketime's library for
/// multi-threaded programs preloaded, as Debian's package `faketime`
/// installs it under `/usr/lib/<triplet>/faketime/`. The process itself
/// runs (no wrapper between it and whoever stops it).
pub fn clock_off(offset: &str) -> anyhow::Result<Vec<(String, String)>> {
    let library = std::fs::read_dir("/usr/lib")?
        .filter_map(Result::ok)
        .map(|dir| dir.path().join("faketime/libfaketimeMT.so.1"))
        .find(|path| path.exists())
        .context("libfaketimeMT.so.1 not found: install faketime")?;
    Ok(vec![
        ("LD_PRELOAD".to_owned(), library.display().to_string()),
        ("FAKETIME".to_owned(), offset.to_owned()),
    ])
}

/// `command`'s environment as the lab's instance `name` listening on
/// `addr`, with `extra` on top.
fn serving(
    command: &mut Command,
    info: &LabInfo,
    name: &str,
    addr: SocketAddr,
    extra: &[(String, String)],
) {
    command
        .envs(instance_env(info, name, addr))
        .env(
            "RUST_LOG",
            std::env::var("SECKILL_LAB_LOG").unwrap_or_else(|_| "info".into()),
        )
        .envs(extra.iter().map(|(k, v)| (k, v)));
}

/// Where everything is; printed by `seckill lab --json`. Starts empty
/// (`Default`) and is filled in as the processes come up.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LabInfo {
    /// nginx, the entry point.
    pub gateway_url: String,
    /// Bearer token for the admin API.
    pub admin_token: String,
    /// How the instances identify buyers.
    #[serde(default)]
    pub buyer_auth: BuyerAuth,
    /// With `buyer_auth` `token`: the key buyer tokens are signed with
    /// (`seckill tokens --key-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buyer_key_file: Option<PathBuf>,
    /// Each instance, directly (bypassing nginx).
    pub instances: Vec<InstanceInfo>,
    /// The Redis the instances use (with sentinels: its master when the
    /// lab started).
    pub redis_url: String,
    /// The independent masters of `redlock` (the first is the main Redis;
    /// with sentinels, its first master's address).
    pub redlock_urls: Vec<String>,
    /// With `--redis-sentinel`: the main Redis's replica and sentinels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel: Option<sentinel::SentinelInfo>,
    /// With `--redis-cluster`: its nodes (then [`LabInfo::redis_url`] is
    /// its first master's, one node of many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<cluster::ClusterInfo>,
    /// The PostgreSQL the instances use.
    pub postgres_url: String,
    /// The MySQL (MariaDB) of the `mysql` store.
    #[serde(default)]
    pub mysql_url: String,
    /// ZooKeeper's `host:port`.
    pub zookeeper: String,
    /// etcd's client `host:port`.
    #[serde(default)]
    pub etcd: String,
    /// With `--observe`: Prometheus, scraping the instances and nginx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus_url: Option<String>,
    /// Every process the lab owns, by name.
    pub processes: Vec<ProcessInfo>,
    /// The lab's temporary directory (logs live here).
    pub dir: PathBuf,
    /// How the servers keep their data.
    pub durability: Durability,
    /// Whether the servers' data is on a power-cut filesystem (under
    /// `dir`/data either way).
    #[serde(default)]
    pub power_cut_fs: bool,
    /// The proxied links between instances and backends (`--proxied`
    /// only): each instance was given these proxies' addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkInfo>,
}

impl LabInfo {
    /// The buyer-token key its instances check tokens with, if they do.
    pub fn buyer_key(&self) -> anyhow::Result<Option<Key>> {
        self.buyer_key_file.as_deref().map(Key::load).transpose()
    }
}

/// One process of the lab.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// `redis`, `redis-2`, `postgres`, `zookeeper`, `instance-a`, `nginx`…
    pub name: String,
    /// Its process id.
    pub pid: Option<u32>,
}

/// One instance.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InstanceInfo {
    /// Its `served_by` name.
    pub name: String,
    /// Its own URL.
    pub url: String,
    /// Its process id.
    pub pid: Option<u32>,
}

/// A running lab. Stop it with [`Lab::stop`]; dropping it kills everything
/// and deletes the directory too, only less politely.
pub struct Lab {
    /// Everything the caller may need.
    pub info: LabInfo,
    /// Started processes, in start order (stopped in reverse).
    processes: Vec<Managed>,
    /// The proxies between instances and backends (`--proxied`); closed
    /// after every process has stopped.
    links: Links,
    /// The power-cut filesystem under every server's data
    /// (`--power-cut-fs`); unmounted after every process has stopped.
    disk: Option<PowerCutFs>,
    /// Deleted on drop, after the processes are gone.
    _dir: tempfile::TempDir,
}

/// How long each server may take to become ready.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(60);

impl Lab {
    /// Starts the topology and waits until every part answers.
    pub async fn start(args: &LabArgs) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (0..=16).contains(&args.shape.instances),
            "--instances must be 0 to 16"
        );
        // A proxy cannot stand in for an address a sentinel names.
        anyhow::ensure!(
            !(args.redis_cluster.is_some() && args.proxied),
            "--redis-cluster and --proxied do not go together: a cluster names its nodes' own addresses"
        );
        anyhow::ensure!(
            !(args.redis_sentinel && args.proxied),
            "--redis-sentinel and --proxied do not go together: instances reach the master the sentinels name, past any proxy"
        );
        let dir = tempfile::Builder::new().prefix("seckill-lab-").tempdir()?;
        // Readable by the postgres user when the lab runs as root.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
        let admin_token = args.admin_token.clone().unwrap_or_else(random_token);
        let data = dir.path().join("data");
        let disk = match args.power_cut_fs {
            true => Some(PowerCutFs::mount(&dir.path().join("disk"), &data)?),
            false => {
                std::fs::create_dir_all(&data)?;
                None
            }
        };
        let buyer_key_file = match args.shape.buyer_auth {
            BuyerAuth::Header => None,
            BuyerAuth::Token => {
                let path = dir.path().join("buyer.key");
                Key::generate().save(&path)?;
                Some(path)
            }
        };
        let mut lab = Self {
            info: LabInfo {
                admin_token,
                buyer_auth: args.shape.buyer_auth,
                buyer_key_file,
                dir: dir.path().to_owned(),
                durability: args.shape.durability,
                power_cut_fs: args.power_cut_fs,
                ..LabInfo::default()
            },
            processes: Vec::new(),
            links: Links::default(),
            disk,
            _dir: dir,
        };
        lab.start_backends(args.redis_sentinel).await?;
        if let Some(masters) = args.redis_cluster {
            lab.start_cluster(masters, args.cluster_replicas).await?;
        }
        // No instances: the backends alone, for in-process tests of the
        // router (the fast test tier).
        if args.shape.instances > 0 {
            lab.start_instances(args).await?;
            lab.start_gateway(args.gateway_port, &args.gateway).await?;
            if args.observe {
                lab.start_observer().await?;
            }
        }
        // What the bootstrap wrote (initdb, mariadb-install-db, the
        // first snapshots) is on disk, as on a machine installed long
        // before its power is cut.
        if let Some(disk) = &lab.disk {
            disk.sync_all()?;
        }
        Ok(lab)
    }

    /// Starts every backend at once: they are independent, so the Redis
    /// servers, ZooKeeper and etcd are spawned first, the two databases'
    /// bootstraps (initdb, mariadb-install-db: the slow part) and the
    /// Sentinel topology run side by side, and then every server's
    /// readiness is waited for together.
    async fn start_backends(&mut self, sentinel: bool) -> anyhow::Result<()> {
        let root = self.info.dir.clone();
        let data = self.data_dir();
        let mode = self.info.durability;
        let mut started: Vec<(Managed, Ready)> = Vec::new();
        let mut redis_urls = Vec::new();
        for name in ["redis", "redis-2", "redis-3"] {
            if name == "redis" && sentinel {
                continue;
            }
            let port = free_port()?;
            let url = format!("redis://127.0.0.1:{port}");
            let server = redis::start(&data.join(name), name, port, mode)?;
            started.push((server, Ready::Redis(url.clone())));
            redis_urls.push(url);
        }
        let zk_port = free_port()?;
        self.info.zookeeper = format!("127.0.0.1:{zk_port}");
        let zk = (root.join("zookeeper"), data.join("zookeeper"));
        let server = zookeeper::start(&zk.0, &zk.1, zk_port)?;
        started.push((server, Ready::Zookeeper(zk_port)));
        let (etcd_port, peer_port) = (free_port()?, free_port()?);
        self.info.etcd = format!("127.0.0.1:{etcd_port}");
        let server = etcd::start(&root.join("etcd"), &data.join("etcd"), etcd_port, peer_port)?;
        started.push((server, Ready::Etcd(etcd_port)));

        let (mysql_port, pg_port) = (free_port()?, free_port()?);
        self.info.mysql_url = mysql::url(mysql_port);
        self.info.postgres_url = postgres::url(pg_port);
        let (mysql_dir, pg_dir) = (root.join("mysql"), root.join("postgres"));
        let (mysql_data, pg_data) = (data.join("mysql"), data.join("postgres"));
        let databases = async {
            tokio::try_join!(
                mysql::start(&mysql_dir, &mysql_data, mysql_port, mode),
                postgres::start(&pg_dir, &pg_data, pg_port, mode),
            )
        };
        let topology = async {
            match sentinel {
                true => self.start_sentinel_topology().await,
                false => Ok(()),
            }
        };
        let ((), (mysql, postgres)) = tokio::try_join!(topology, databases)?;
        started.push((mysql, Ready::Mysql(mysql_port)));
        started.push((postgres, Ready::Postgres(self.info.postgres_url.clone())));
        // After the Sentinel master's, where there is one: RedLock's
        // masters are named in this order (`redis`, `redis-2`, `redis-3`).
        self.info.redlock_urls.extend(redis_urls);
        self.info.redis_url = self.info.redlock_urls[0].clone();

        let first = self.processes.len();
        let mut probes = Vec::with_capacity(started.len());
        for (process, ready) in started {
            self.adopt(process);
            probes.push(ready);
        }
        let waits = self.processes[first..]
            .iter_mut()
            .zip(&probes)
            .map(|(process, ready)| process.wait_ready(READY_TIMEOUT, move || ready.answers()));
        futures::future::try_join_all(waits).await?;
        Ok(())
    }

    /// Starts all instances at once (which also exercises concurrent
    /// migrations), then waits for each `/readyz`.
    async fn start_instances(&mut self, args: &LabArgs) -> anyhow::Result<()> {
        let exe = std::env::current_exe().context("locating the seckill binary")?;
        let mut started = Vec::new();
        for index in 0..args.shape.instances {
            let name = format!("instance-{}", (b'a' + index as u8) as char);
            let own = args.instance_env_of.iter().filter(|(of, ..)| *of == name);
            let extra_env: Vec<(String, String)> = (args.instance_env.iter().cloned())
                .chain(own.map(|(_, key, value)| (key.clone(), value.clone())))
                .collect();
            let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
            // Proxied, the instance sees the backends through its links.
            let seen = if args.proxied {
                self.links.open(&self.info, &name).await?
            } else {
                self.info.clone()
            };
            let mut command = Command::new(&exe);
            command.arg("serve");
            serving(&mut command, &seen, &name, addr, &extra_env);
            let log = self.info.dir.join(format!("{name}.log"));
            let process = Managed::spawn(&name, command, &log)?;
            self.info.instances.push(InstanceInfo {
                name,
                url: format!("http://{addr}"),
                pid: process.pid(),
            });
            started.push(process);
        }
        self.info.links = self.links.info();
        let urls: Vec<String> = self.info.instances.iter().map(|i| i.url.clone()).collect();
        for (process, url) in started.into_iter().zip(urls) {
            self.wait(process, move || {
                let url = format!("{url}/readyz");
                async move { http_ok(&url).await }
            })
            .await?;
        }
        Ok(())
    }

    /// One more instance, outside the gateway (reached at its own URL),
    /// on the lab's backends, with `env` added to its environment
    /// (libfaketime's `LD_PRELOAD` and `FAKETIME`: an instance whose clock
    /// is off). The instance itself is the lab's process, so stopping it
    /// stops it: a wrapper such as the `faketime` command forks and waits,
    /// and its child outlived the lab. Stopped with the lab.
    pub async fn start_outside_instance(
        &mut self,
        name: &str,
        env: &[(String, String)],
    ) -> anyhow::Result<InstanceInfo> {
        let exe = std::env::current_exe().context("locating the seckill binary")?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let mut command = Command::new(exe);
        command.arg("serve");
        serving(&mut command, &self.info, name, addr, env);
        let log = self.info.dir.join(format!("{name}.log"));
        let process = Managed::spawn(name, command, &log)?;
        let info = InstanceInfo {
            name: name.to_owned(),
            url: format!("http://{addr}"),
            pid: process.pid(),
        };
        let ready = format!("{}/readyz", info.url);
        self.wait(process, move || {
            let url = ready.clone();
            async move { http_ok(&url).await }
        })
        .await?;
        Ok(info)
    }

    async fn start_gateway(
        &mut self,
        port: Option<u16>,
        limits: &nginx::GatewayLimits,
    ) -> anyhow::Result<()> {
        let port = match port {
            Some(port) => port,
            None => free_port()?,
        };
        let listen = SocketAddr::from(([127, 0, 0, 1], port));
        let upstreams: Vec<SocketAddr> = self
            .info
            .instances
            .iter()
            .map(|i| i.url.trim_start_matches("http://").parse())
            .collect::<Result<_, _>>()?;
        let server = nginx::start(&self.info.dir.join("nginx"), listen, &upstreams, limits)?;
        self.info.gateway_url = format!("http://{listen}");
        let url = format!("{}/healthz", self.info.gateway_url);
        self.wait(server, move || {
            let url = url.clone();
            async move { http_ok(&url).await }
        })
        .await
    }

    /// Prometheus and the nginx exporter, on the running instances and
    /// gateway.
    async fn start_observer(&mut self) -> anyhow::Result<()> {
        let dir = self.info.dir.join("prometheus");
        let exporter_port = free_port()?;
        let status = format!("{}/stub_status", self.info.gateway_url);
        let exporter = observe::start_exporter(&dir, &status, exporter_port)?;
        let metrics = format!("http://127.0.0.1:{exporter_port}/metrics");
        self.wait(exporter, move || {
            let url = metrics.clone();
            async move { http_ok(&url).await }
        })
        .await?;
        let instances: Vec<String> = self
            .info
            .instances
            .iter()
            .map(|i| i.url.trim_start_matches("http://").to_owned())
            .collect();
        let config = observe::config(&instances, &format!("127.0.0.1:{exporter_port}"));
        let port = free_port()?;
        let server = observe::start_prometheus(&dir, &config, port)?;
        let url = format!("http://127.0.0.1:{port}");
        self.info.prometheus_url = Some(url.clone());
        self.wait(server, move || {
            let ready = format!("{url}/-/ready");
            async move { http_ok(&ready).await }
        })
        .await
    }

    /// Polls `ready` until it holds, failing early (with the log) if the
    /// process exits; the process joins the lab either way so it is
    /// cleaned up.
    async fn wait<F, Fut>(&mut self, process: Managed, ready: F) -> anyhow::Result<()>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        self.adopt(process);
        let process = self.processes.last_mut().expect("just pushed");
        process.wait_ready(READY_TIMEOUT, ready).await
    }

    /// Takes over a process already started and ready (it is stopped
    /// with the lab, newest first, and can be signalled by name).
    fn adopt(&mut self, process: Managed) {
        self.info.processes.push(ProcessInfo {
            name: process.name.clone(),
            pid: process.pid(),
        });
        self.processes.push(process);
    }

    /// Sends `signal` to the process called `name`: SIGSTOP freezes it,
    /// SIGCONT resumes it, SIGKILL crashes it, SIGTERM stops it politely.
    pub fn signal(&self, name: &str, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        self.process(name)?.signal(signal)
    }

    /// Sends `signal` to `name` and every process it started (PostgreSQL's
    /// backends): the whole server frozen, resumed or crashed at once.
    pub fn signal_tree(&self, name: &str, signal: nix::sys::signal::Signal) -> anyhow::Result<()> {
        self.process(name)?.signal_tree(signal)
    }

    /// Starts the backend `name` again from its own files (after a crash
    /// or a stop) on the same port, and waits until it answers. The
    /// instances are not told: they must find it again by themselves.
    pub async fn restart(&mut self, name: &str) -> anyhow::Result<()> {
        let ready = self.ready_check(name)?;
        let index = self
            .processes
            .iter()
            .position(|p| p.name == name)
            .with_context(|| format!("the lab has no process called {name}"))?;
        let process = &mut self.processes[index];
        process.restart().await?;
        let pid = process.pid();
        if let Some(info) = self.info.processes.iter_mut().find(|p| p.name == name) {
            info.pid = pid;
        }
        process
            .wait_ready(READY_TIMEOUT, || ready.answers())
            .await
            .with_context(|| format!("restarting {name}"))
    }

    /// How to tell that the backend `name` is up again.
    fn ready_check(&self, name: &str) -> anyhow::Result<Ready> {
        let redis = ["redis", "redis-2", "redis-3"];
        if let Some(index) = redis.iter().position(|r| *r == name) {
            return Ok(Ready::Redis(self.info.redlock_urls[index].clone()));
        }
        match name {
            "postgres" => Ok(Ready::Postgres(self.info.postgres_url.clone())),
            "mysql" => Ok(Ready::Mysql(port_of(&self.info.mysql_url)?)),
            "zookeeper" => Ok(Ready::Zookeeper(port_of(&self.info.zookeeper)?)),
            "etcd" => Ok(Ready::Etcd(port_of(&self.info.etcd)?)),
            other => anyhow::bail!("{other} is not a backend the lab can restart"),
        }
    }

    /// Switches the link between `instance` and `backend` (a lab started
    /// `--proxied`): [`Mode::Blackhole`] partitions them, [`Mode::Cut`]
    /// resets their connections, [`Mode::Pass`] heals the link. Every
    /// other link, the other instances' included, is left as it is.
    pub fn partition(&self, instance: &str, backend: Backend, mode: Mode) -> anyhow::Result<()> {
        self.links.set(instance, backend, mode)
    }

    /// Where every server keeps its data: `data` in the lab's
    /// directory, on the power-cut filesystem when there is one.
    fn data_dir(&self) -> PathBuf {
        self.info.dir.join("data")
    }

    fn process(&self, name: &str) -> anyhow::Result<&Managed> {
        self.processes
            .iter()
            .find(|p| p.name == name)
            .with_context(|| format!("the lab has no process called {name}"))
    }

    /// Stops everything politely, newest first (nginx, instances — which
    /// drain their order writers, through healed links — then the
    /// backends), and deletes the directory.
    pub async fn stop(mut self) {
        self.links.heal();
        while let Some(process) = self.processes.pop() {
            process.stop(Duration::from_secs(10)).await;
        }
        self.links.stop().await;
    }
}

/// A backend's readiness probe.
enum Ready {
    Redis(String),
    Postgres(String),
    Mysql(u16),
    Zookeeper(u16),
    Etcd(u16),
}

impl Ready {
    async fn answers(&self) -> bool {
        match self {
            Self::Redis(url) => redis::ready(url).await,
            Self::Postgres(url) => postgres::ready(url).await,
            Self::Mysql(port) => mysql::ready(*port).await,
            Self::Zookeeper(port) => zookeeper::ready(*port).await,
            Self::Etcd(port) => etcd::ready(*port).await,
        }
    }
}

/// The port of a `scheme://user@host:port/db` URL.
fn port_of(url: &str) -> anyhow::Result<u16> {
    url.rsplit(':')
        .next()
        .and_then(|tail| tail.split('/').next())
        .and_then(|port| port.parse().ok())
        .with_context(|| format!("no port in {url}"))
}

fn random_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn http_ok(url: &str) -> bool {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build();
    match client {
        Ok(client) => client
            .get(url)
            .send()
            .await
            .is_ok_and(|r| r.status().is_success()),
        Err(_) => false,
    }
}

/// `seckill lab`: start, print where things are, wait for Ctrl-C, SIGTERM
/// or the parent's death, stop.
pub async fn run(args: LabArgs) -> anyhow::Result<()> {
    let parent = std::os::unix::process::parent_id();
    let lab = Lab::start(&args).await?;
    if args.json {
        println!("{}", serde_json::to_string(&lab.info)?);
    } else {
        println!("seckill lab is up ({} instances)", lab.info.instances.len());
        println!("  gateway      {}", lab.info.gateway_url);
        println!("  admin token  {}", lab.info.admin_token);
        match &lab.info.buyer_key_file {
            Some(key) => println!(
                "  buyers       signed tokens: seckill tokens --key-file {} --users N",
                key.display()
            ),
            None => {
                println!("  buyers       X-User-Id, believed as sent (--buyer-auth token to sign)")
            }
        }
        for instance in &lab.info.instances {
            println!("  {:<12} {}", instance.name, instance.url);
        }
        println!("  redis        {}", lab.info.redis_url);
        println!("  redlock      {}", lab.info.redlock_urls.join(" "));
        if let Some(topology) = &lab.info.sentinel {
            println!("  replica      {}", topology.replica_url);
            println!("  sentinels    {}", topology.sentinels.join(" "));
        }
        if let Some(cluster) = &lab.info.cluster {
            println!("  cluster      {}", cluster.masters.join(" "));
            if !cluster.replicas.is_empty() {
                println!("  replicas     {}", cluster.replicas.join(" "));
            }
        }
        println!("  zookeeper    {}", lab.info.zookeeper);
        println!("  etcd         {}", lab.info.etcd);
        println!("  postgres     {}", lab.info.postgres_url);
        println!("  mysql        {}", lab.info.mysql_url);
        if !lab.info.links.is_empty() {
            println!(
                "  proxies      {} links, instance to backend (--json lists them)",
                lab.info.links.len()
            );
        }
        println!("  durability   {}", lab.info.durability.as_str());
        if let Some(url) = &lab.info.prometheus_url {
            println!("  prometheus   {url}");
        }
        println!("  logs         {}", lab.info.dir.display());
        println!("Ctrl-C stops it and removes everything.");
    }
    let parent_gone = async {
        while std::os::unix::process::parent_id() == parent {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        _ = crate::instance::serve::shutdown_signal() => {}
        _ = parent_gone => {}
    }
    lab.stop().await;
    Ok(())
}
