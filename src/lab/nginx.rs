//! The gateway: nginx in front of the instances, configured from
//! `nginx/seckill.conf.template` (the same file docker compose uses).

use std::net::SocketAddr;
use std::path::Path;

use tokio::process::Command;

use super::find;
use super::process::Managed;

/// The http-level template shared with docker compose.
pub const TEMPLATE: &str = include_str!("../../nginx/seckill.conf.template");

/// Far above one load generator: the comparison measures locks, not limits.
const LENIENT_RATE: u32 = 100_000;
/// Idem for the burst.
const LENIENT_BURST: u32 = 100_000;
/// Idem for connections per address.
const LENIENT_CONN: u32 = 10_000;

/// The gateway's per-address limits.
#[derive(Debug, Clone, clap::Args)]
pub struct GatewayLimits {
    /// nginx's leaky bucket per client address, requests per second.
    #[arg(long, env = "SECKILL_GATEWAY_RATE", default_value_t = LENIENT_RATE)]
    pub gateway_rate: u32,
    /// Requests above the rate admitted at once (nginx `burst`, `nodelay`).
    #[arg(long, env = "SECKILL_GATEWAY_BURST", default_value_t = LENIENT_BURST)]
    pub gateway_burst: u32,
    /// Open connections per client address.
    #[arg(long, env = "SECKILL_GATEWAY_CONN", default_value_t = LENIENT_CONN)]
    pub gateway_conn: u32,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        Self {
            gateway_rate: LENIENT_RATE,
            gateway_burst: LENIENT_BURST,
            gateway_conn: LENIENT_CONN,
        }
    }
}

/// Fills the template's variables.
pub fn render(listen: SocketAddr, upstreams: &[SocketAddr], limits: &GatewayLimits) -> String {
    let servers: String = upstreams
        .iter()
        .map(|addr| format!("server {addr}; "))
        .collect();
    TEMPLATE
        .replace("${SECKILL_UPSTREAMS}", servers.trim_end())
        .replace("${SECKILL_LISTEN}", &listen.to_string())
        .replace(
            "${SECKILL_GATEWAY_RATE}",
            &format!("{}r/s", limits.gateway_rate.max(1)),
        )
        .replace(
            "${SECKILL_GATEWAY_BURST}",
            &limits.gateway_burst.to_string(),
        )
        .replace(
            "${SECKILL_GATEWAY_CONN}",
            &limits.gateway_conn.max(1).to_string(),
        )
}

/// Writes the configuration under `dir` and starts nginx in the foreground.
pub fn start(
    dir: &Path,
    listen: SocketAddr,
    upstreams: &[SocketAddr],
    limits: &GatewayLimits,
) -> anyhow::Result<Managed> {
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(dir.join("seckill.conf"), render(listen, upstreams, limits))?;
    // The lab's own main configuration: everything that differs from the
    // nginx image's (pid and temp paths inside the lab's directory).
    let main = format!(
        "worker_processes auto;\n\
         pid {dir}/nginx.pid;\n\
         error_log {dir}/logs/error.log warn;\n\
         events {{ worker_connections 8192; }}\n\
         http {{\n\
           client_body_temp_path {dir}/tmp/body;\n\
           proxy_temp_path {dir}/tmp/proxy;\n\
           fastcgi_temp_path {dir}/tmp/fastcgi;\n\
           uwsgi_temp_path {dir}/tmp/uwsgi;\n\
           scgi_temp_path {dir}/tmp/scgi;\n\
           include {dir}/seckill.conf;\n\
         }}\n",
        dir = dir.display()
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, main)?;
    let mut command = Command::new(find::nginx()?);
    command
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(&conf)
        .arg("-g")
        .arg("daemon off;");
    Managed::spawn("nginx", command, &dir.join("nginx.log"))
}
