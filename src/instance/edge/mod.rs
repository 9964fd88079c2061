//! The service's own edge: a token bucket per client address (and an
//! optional global one) on the buy route, and overload protection — a
//! concurrency limit that sheds load instead of queueing, and a request
//! timeout — on every route. nginx has its own leaky bucket in front
//! (`nginx/seckill.conf.template`); this one also protects an instance that
//! is reached directly.

pub mod buyers;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::response::{IntoResponse, Response};
use governor::DefaultKeyedRateLimiter;
use serde::Serialize;
use tower_governor::GovernorError;
use tower_governor::key_extractor::KeyExtractor;
use utoipa::ToSchema;

use crate::model::error::{ApiError, Limiter};
use crate::model::telemetry;
use crate::sale::guard::Tuning;
use crate::sale::guard::breaker::Trip;

/// Rate limits and overload protection, from flags or the environment.
///
/// The defaults are far above what one load generator sends, so the
/// strategy comparison (everything from 127.0.0.1) measures locks, not
/// limits; the `rate-limit` settings of a lab tighten them.
#[derive(Debug, Clone, clap::Args, Serialize, ToSchema)]
pub struct EdgeArgs {
    /// Buys per second allowed per client address (token bucket refill).
    #[arg(long, env = "SECKILL_RATE_PER_SEC", default_value_t = 100_000)]
    pub rate_per_sec: u64,
    /// Bucket size per client address: the burst allowed at once.
    #[arg(long, env = "SECKILL_RATE_BURST", default_value_t = 100_000)]
    pub rate_burst: u32,
    /// Buys per second allowed per buyer, per instance (token bucket
    /// refill; 0: no per-buyer bucket). Keyed by the verified buyer with
    /// `buyer_auth = token`.
    #[arg(long, env = "SECKILL_BUYER_RATE_PER_SEC", default_value_t = 50)]
    pub buyer_rate_per_sec: u64,
    /// Bucket size per buyer: the burst one buyer may send at once.
    #[arg(long, env = "SECKILL_BUYER_RATE_BURST", default_value_t = 100)]
    pub buyer_rate_burst: u32,
    /// Buys per second allowed from everybody together (0 = no global bucket).
    #[arg(long, env = "SECKILL_GLOBAL_RATE_PER_SEC", default_value_t = 0)]
    pub global_rate_per_sec: u64,
    /// Addresses or networks (`10.0.0.0/8`) whose `X-Real-IP` is believed:
    /// the gateway. Anyone else is keyed by its own peer address, whatever
    /// headers it sends.
    #[arg(
        long,
        env = "SECKILL_TRUSTED_PROXIES",
        value_delimiter = ',',
        default_value = "127.0.0.1,::1"
    )]
    #[schema(value_type = Vec<String>)]
    pub trusted_proxies: Vec<Network>,
    /// Requests handled at once per instance; more are turned away at
    /// once with 503 `busy` instead of queueing.
    #[arg(long, env = "SECKILL_MAX_IN_FLIGHT", default_value_t = 4096)]
    pub max_in_flight: usize,
    /// Longest a request may take before it is answered 503 `busy`. Above
    /// the largest `acquire_timeout_ms` + `work_ms` a reset accepts.
    #[arg(long, env = "SECKILL_REQUEST_TIMEOUT_MS", default_value_t = 130_000)]
    pub request_timeout_ms: u64,
    /// How long an `Idempotency-Key` keeps its sale's answer for retries
    /// (and how long a crashed request's claim blocks its key).
    #[arg(long, env = "SECKILL_IDEMPOTENCY_TTL_SECS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub idempotency_ttl_secs: u64,
    /// The adaptive concurrency limit's latency target per backend path: a
    /// sale answered later than this cuts its path's limit to what the
    /// path answers within it (see `sale::guard::limit`). Below what
    /// buyers wait for, above the path's healthy latency.
    #[arg(long, env = "SECKILL_ADAPTIVE_TARGET_MS", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub adaptive_target_ms: u64,
    /// The fewest buys a path's adaptive limit lets in flight.
    #[arg(long, env = "SECKILL_ADAPTIVE_MIN", default_value_t = 8,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub adaptive_min: usize,
    /// The circuit breaker: a sale slower than this counts as bad.
    #[arg(long, env = "SECKILL_BREAKER_SLOW_MS", default_value_t = 10_000)]
    pub breaker_slow_ms: u64,
    /// The circuit breaker opens when this share of a window's sales were
    /// bad (errors, unknown outcomes, slow ones).
    #[arg(long, env = "SECKILL_BREAKER_RATIO", default_value_t = 0.5)]
    pub breaker_ratio: f64,
    /// The sales a window must hold before the breaker may open.
    #[arg(long, env = "SECKILL_BREAKER_MIN_CALLS", default_value_t = 20)]
    pub breaker_min_calls: u64,
    /// How far back the breaker counts.
    #[arg(long, env = "SECKILL_BREAKER_WINDOW_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(10..))]
    pub breaker_window_ms: u64,
    /// How long an open breaker refuses before it lets a probe through.
    #[arg(long, env = "SECKILL_BREAKER_OPEN_MS", default_value_t = 1_000)]
    pub breaker_open_ms: u64,
    /// The service's own edge layers switched off, comma-separated; only
    /// to measure what each costs (the bench's figures with one layer
    /// off). None by default.
    #[arg(long, env = "SECKILL_EDGE_OFF", value_enum, value_delimiter = ',')]
    pub edge_off: Vec<Layer>,
}

impl EdgeArgs {
    /// Whether `layer` runs.
    pub fn on(&self, layer: Layer) -> bool {
        !self.edge_off.contains(&layer)
    }

    /// The backend paths' guards as these settings tune them.
    pub fn guards(&self) -> Tuning {
        Tuning {
            target: self
                .on(Layer::Adaptive)
                .then(|| Duration::from_millis(self.adaptive_target_ms)),
            floor: self.adaptive_min,
            ceiling: self.max_in_flight,
            trip: self.on(Layer::Breaker).then(|| Trip {
                slow: Duration::from_millis(self.breaker_slow_ms),
                ratio: self.breaker_ratio,
                min_calls: self.breaker_min_calls,
                window: Duration::from_millis(self.breaker_window_ms),
                open_for: Duration::from_millis(self.breaker_open_ms),
            }),
        }
    }
}

/// One of the instance's edge layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The token buckets on the buy and reserve routes.
    Buckets,
    /// Load shedding: the concurrency limit that answers 503 at once.
    Shed,
    /// The request timeout.
    Timeout,
    /// The adaptive concurrency limit per backend path.
    Adaptive,
    /// The circuit breaker per backend path.
    Breaker,
}

/// An address or a network in CIDR notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    addr: IpAddr,
    prefix: u8,
}

impl Network {
    /// Whether `ip` lies in this network (an IPv4 network never contains
    /// an IPv6 address and vice versa).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let (net, ip, bits) = match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(i)) => {
                (u128::from(u32::from(n)), u128::from(u32::from(i)), 32)
            }
            (IpAddr::V6(n), IpAddr::V6(i)) => (u128::from(n), u128::from(i), 128),
            _ => return false,
        };
        let host_bits = bits - u32::from(self.prefix);
        host_bits >= 128 || (net >> host_bits) == (ip >> host_bits)
    }
}

impl std::str::FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|e| format!("{text}: {e}"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.trim().parse::<u8>().map_err(|e| format!("{text}: {e}"))?,
            None => max,
        };
        if prefix > max {
            return Err(format!("{text}: prefix longer than {max}"));
        }
        Ok(Self { addr, prefix })
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl Serialize for Network {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The client a request is counted against: the peer address, or the
/// `X-Real-IP` the gateway set when the peer is a trusted proxy.
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Arc<Vec<Network>>,
}

impl ClientIp {
    /// Trusting `X-Real-IP` only from `trusted`.
    pub fn new(trusted: &[Network]) -> Self {
        Self {
            trusted: Arc::new(trusted.to_vec()),
        }
    }

    /// The key for a request with this peer and headers: the address, or
    /// for IPv6 its /64 (one host is handed a whole /64 and may pick any
    /// address in it: keyed on the /128, one client is 2^64 buckets).
    pub fn client(&self, peer: IpAddr, real_ip: Option<&str>) -> IpAddr {
        let trusted = self.trusted.iter().any(|net| net.contains(peer));
        let ip = match real_ip.and_then(|v| v.trim().parse().ok()) {
            Some(ip) if trusted => ip,
            _ => peer,
        };
        match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6((u128::from(v6) & !u128::from(u64::MAX)).into()),
            },
            v4 => v4,
        }
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract<T>(&self, req: &Request<T>) -> Result<Self::Key, GovernorError> {
        let peer = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
            .ok_or(GovernorError::UnableToExtractKey)?;
        let real_ip = req.headers().get("x-real-ip").and_then(|v| v.to_str().ok());
        Ok(self.client(peer, real_ip))
    }
}

/// The governor's refusals in the contract's shape.
pub fn governor_error(error: GovernorError) -> Response<Body> {
    match error {
        GovernorError::TooManyRequests { wait_time, .. } => {
            telemetry::rejected("rate_limited");
            ApiError::RateLimited {
                retry_after: Duration::from_secs(wait_time.max(1)),
                by: Limiter::Service,
            }
            .into_response()
        }
        GovernorError::UnableToExtractKey => {
            ApiError::BadRequest("the client address is unknown".into()).into_response()
        }
        GovernorError::Other { msg, .. } => {
            ApiError::BadRequest(msg.unwrap_or_else(|| "refused".into())).into_response()
        }
    }
}

/// The period between two tokens for `per_sec` tokens a second.
pub fn refill_period(per_sec: u64) -> Duration {
    Duration::from_nanos(1_000_000_000 / per_sec.max(1))
}

/// How often a keyed limiter drops the keys whose bucket is full again.
/// A key is kept at most `burst / rate` after its last request (2 s for a
/// buyer by default, 1 s for an address), so the map holds about the keys
/// of the last `SWEEP_EVERY` plus that: a flood of a million fresh buyer
/// ids a minute keeps seconds' worth of them, not the minute's (swept
/// every minute, 1.14 million ids took two instances from 65 to 173 MiB).
const SWEEP_EVERY: Duration = Duration::from_secs(2);

/// Sweeps `limiter`'s stale keys every [`SWEEP_EVERY`] and gives the
/// table's room back, so that its memory follows the active clients (or
/// buyers), not every one ever seen, and shrinks once they go. The
/// sweeper holds it weakly: it ends once the limiter is dropped at
/// shutdown.
pub fn keep_swept<K>(limiter: &Arc<DefaultKeyedRateLimiter<K>>)
where
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    let limiter = Arc::downgrade(limiter);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SWEEP_EVERY).await;
            match limiter.upgrade() {
                Some(limiter) => {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
                None => return,
            }
        }
    });
}

/// What load shedding and the timeout turn into. Shed requests never
/// started: `busy`. A request that timed out did start, and a buy's sale
/// runs on in its own task, so a timed-out write (POST, PUT) may yet
/// happen: `outcome_unknown`, never "nothing happened"; a timed-out read
/// is merely `busy`.
pub async fn overload(method: axum::http::Method, error: tower::BoxError) -> ApiError {
    if !error.is::<tower::timeout::error::Elapsed>() {
        telemetry::rejected("overloaded");
        return ApiError::Busy {
            message: "overloaded: too many requests in flight".into(),
            retry_after: Duration::from_secs(1),
        };
    }
    telemetry::rejected("timeout");
    if method.is_safe() {
        return ApiError::Busy {
            message: "the request took too long".into(),
            retry_after: Duration::from_secs(1),
        };
    }
    ApiError::OutcomeUnknown {
        order_id: None,
        cause: "the request timed out while its write may still run".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_trusted_proxies_choose_the_client() {
        let keys = ClientIp::new(&[
            "127.0.0.1".parse().unwrap(),
            "172.16.0.0/12".parse().unwrap(),
        ]);
        let docker: IpAddr = "172.18.0.5".parse().unwrap();
        assert_eq!(
            keys.client(docker, Some("203.0.113.7")),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        let proxy: IpAddr = "127.0.0.1".parse().unwrap();
        let stranger: IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(
            keys.client(proxy, Some("203.0.113.7")),
            "203.0.113.7".parse::<IpAddr>().unwrap()
        );
        assert_eq!(keys.client(proxy, Some("not an ip")), proxy);
        assert_eq!(keys.client(stranger, Some("203.0.113.7")), stranger);
    }

    #[test]
    fn an_ipv6_client_is_its_64() {
        let keys = ClientIp::new(&[]);
        let key = |ip: &str| keys.client(ip.parse().unwrap(), None);
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff:1:2:3"));
        assert_eq!(key("2001:db8:1:2:ffff:1:2:3"), key("2001:db8:1:2::"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:203.0.113.7"), key("203.0.113.7"));
        assert_ne!(key("203.0.113.7"), key("203.0.113.8"));
    }

    #[test]
    fn networks_parse_and_match() {
        let net: Network = "10.0.0.0/8".parse().unwrap();
        assert!(net.contains("10.200.3.4".parse().unwrap()));
        assert!(!net.contains("11.0.0.1".parse().unwrap()));
        assert!(!net.contains("::1".parse().unwrap()));
        let one: Network = "::1".parse().unwrap();
        assert!(one.contains("::1".parse().unwrap()));
        let all: Network = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Network>().is_err());
        assert!("nonsense".parse::<Network>().is_err());
    }

    #[test]
    fn refill_periods() {
        assert_eq!(refill_period(1), Duration::from_secs(1));
        assert_eq!(refill_period(1000), Duration::from_millis(1));
        assert_eq!(refill_period(0), Duration::from_secs(1));
    }
}
