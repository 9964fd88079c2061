//! The lab's proxied links (`seckill lab --proxied`): one fault
//! [`Proxy`] per (instance, backend) pair, so a scenario can cut one
//! instance off from one backend while every other link keeps working —
//! a partition, which this kernel cannot make with netem.
//!
//! Each instance is started with its proxies' addresses in place of the
//! servers' (the same environment keys, other URLs); the proxies run in
//! the lab's own process, which is how a scenario reaches them.

use std::net::SocketAddr;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::LabInfo;
use super::proxy::{Mode, Proxy};

/// A backend an instance talks to: one proxied link per instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The main Redis (stock, locks, the order stream), also RedLock's
    /// first master.
    Redis,
    /// RedLock's second master.
    Redis2,
    /// RedLock's third master.
    Redis3,
    /// PostgreSQL.
    Postgres,
    /// MySQL (MariaDB).
    Mysql,
    /// ZooKeeper.
    ZooKeeper,
    /// etcd.
    Etcd,
}

impl Backend {
    /// Every backend an instance is given, in the order their links open.
    pub const ALL: [Self; 7] = [
        Self::Redis,
        Self::Redis2,
        Self::Redis3,
        Self::Postgres,
        Self::Mysql,
        Self::ZooKeeper,
        Self::Etcd,
    ];

    /// RedLock's masters, in the order of `redlock_urls`.
    pub const REDLOCK: [Self; 3] = [Self::Redis, Self::Redis2, Self::Redis3];

    /// The name of the lab's process serving it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Redis2 => "redis-2",
            Self::Redis3 => "redis-3",
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
            Self::ZooKeeper => "zookeeper",
            Self::Etcd => "etcd",
        }
    }

    /// Where `info` says the backend is: a URL, or ZooKeeper's or etcd's
    /// `host:port`.
    fn location(self, info: &LabInfo) -> anyhow::Result<&str> {
        let master = |i: usize| {
            info.redlock_urls
                .get(i)
                .map(String::as_str)
                .with_context(|| format!("the lab has no RedLock master {}", i + 1))
        };
        match self {
            Self::Redis => master(0),
            Self::Redis2 => master(1),
            Self::Redis3 => master(2),
            Self::Postgres => Ok(&info.postgres_url),
            Self::Mysql => Ok(&info.mysql_url),
            Self::ZooKeeper => Ok(&info.zookeeper),
            Self::Etcd => Ok(&info.etcd),
        }
    }
}

/// One proxied link, as `seckill lab --json` shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkInfo {
    /// The instance on the link (`instance-a`).
    pub instance: String,
    /// The backend's process name (`redis`, `postgres`…).
    pub backend: String,
    /// The proxy's address, which the instance was given.
    pub proxy: SocketAddr,
    /// The backend's own address.
    pub upstream: SocketAddr,
}

/// One proxy and what it connects.
struct Link {
    instance: String,
    backend: Backend,
    upstream: SocketAddr,
    proxy: Proxy,
}

/// Every proxied link of a lab (none unless it was started `--proxied`).
#[derive(Default)]
pub struct Links {
    links: Vec<Link>,
}

impl Links {
    /// Starts `instance`'s proxies, one per backend, and returns `info` as
    /// that instance must see it: every backend's location pointing at its
    /// proxy. The main Redis URL goes through the proxy of the master it
    /// names (the first), so one link carries all of the instance's
    /// traffic to one server.
    pub async fn open(&mut self, info: &LabInfo, instance: &str) -> anyhow::Result<LabInfo> {
        let mut seen = info.clone();
        for backend in Backend::ALL {
            let location = backend.location(info)?;
            let upstream = address(location)?;
            let proxy = Proxy::start(upstream).await?;
            let routed = reroute(location, proxy.addr())?;
            match backend {
                Backend::Postgres => seen.postgres_url = routed,
                Backend::Mysql => seen.mysql_url = routed,
                Backend::ZooKeeper => seen.zookeeper = routed,
                Backend::Etcd => seen.etcd = routed,
                redis => {
                    let index = Backend::REDLOCK
                        .iter()
                        .position(|b| *b == redis)
                        .expect("a Redis backend is a RedLock master");
                    seen.redlock_urls[index] = routed.clone();
                    if address(&info.redis_url)? == upstream {
                        seen.redis_url = routed;
                    }
                }
            }
            self.links.push(Link {
                instance: instance.to_owned(),
                backend,
                upstream,
                proxy,
            });
        }
        anyhow::ensure!(
            seen.redis_url != info.redis_url,
            "the main Redis ({}) is none of the RedLock masters, so no link carries it",
            info.redis_url
        );
        Ok(seen)
    }

    /// Switches the link between `instance` and `backend` to `mode`.
    pub fn set(&self, instance: &str, backend: Backend, mode: Mode) -> anyhow::Result<()> {
        let link = self
            .links
            .iter()
            .find(|l| l.instance == instance && l.backend == backend)
            .with_context(|| {
                format!(
                    "no proxied link from {instance} to {} (was the lab started with --proxied?)",
                    backend.name()
                )
            })?;
        link.proxy.set(mode);
        Ok(())
    }

    /// Every link back to [`Mode::Pass`]: what the lab does before it
    /// stops, so that instances draining their order writers are not left
    /// behind a partition a failed scenario forgot.
    pub fn heal(&self) {
        for link in &self.links {
            link.proxy.set(Mode::Pass);
        }
    }

    /// Where each link is.
    pub fn info(&self) -> Vec<LinkInfo> {
        self.links
            .iter()
            .map(|l| LinkInfo {
                instance: l.instance.clone(),
                backend: l.backend.name().to_owned(),
                proxy: l.proxy.addr(),
                upstream: l.upstream,
            })
            .collect()
    }

    /// Closes every link.
    pub async fn stop(self) {
        for link in self.links {
            link.proxy.stop().await;
        }
    }
}

/// The address in a backend's location: ZooKeeper's `host:port`, or the
/// host and port of a `redis://` or `postgres://` URL (the lab's are IP
/// literals).
fn address(location: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(addr) = location.parse() {
        return Ok(addr);
    }
    let url = reqwest::Url::parse(location).with_context(|| format!("parsing {location}"))?;
    let host = url
        .host_str()
        .with_context(|| format!("{location} names no host"))?;
    let port = url
        .port()
        .with_context(|| format!("{location} names no port"))?;
    format!("{host}:{port}")
        .parse()
        .with_context(|| format!("{location}'s host is not an IP address"))
}

/// `location` with its address replaced by `proxy`'s.
fn reroute(location: &str, proxy: SocketAddr) -> anyhow::Result<String> {
    if location.parse::<SocketAddr>().is_ok() {
        return Ok(proxy.to_string());
    }
    let mut url = reqwest::Url::parse(location)?;
    url.set_ip_host(proxy.ip())
        .map_err(|()| anyhow::anyhow!("{location} cannot take an IP host"))?;
    url.set_port(Some(proxy.port()))
        .map_err(|()| anyhow::anyhow!("{location} cannot take a port"))?;
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_are_rerouted_to_the_proxy_and_keep_the_rest() {
        let proxy: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        for (location, upstream, routed) in [
            (
                "redis://127.0.0.1:6379",
                "127.0.0.1:6379",
                "redis://127.0.0.1:4000",
            ),
            (
                "postgres://postgres@127.0.0.1:5432/seckill",
                "127.0.0.1:5432",
                "postgres://postgres@127.0.0.1:4000/seckill",
            ),
            ("127.0.0.1:2181", "127.0.0.1:2181", "127.0.0.1:4000"),
        ] {
            assert_eq!(address(location).unwrap().to_string(), upstream);
            assert_eq!(reroute(location, proxy).unwrap(), routed);
        }
    }
}
