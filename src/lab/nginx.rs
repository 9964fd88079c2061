//! The gateway: nginx in front of the instances, configured from
//! `nginx/seckill.conf.template` (the same file docker compose uses).

use std::net::SocketAddr;
use std::path::Path;

use tokio::process::Command;

use super::find;
use super::process::Managed;

/// The http-level template shared with docker compose.
pub const TEMPLATE: &str = include_str!("../../nginx/seckill.conf.template");

/// Fills the template's variables.
pub fn render(listen: SocketAddr, upstreams: &[SocketAddr]) -> String {
    let servers: String = upstreams
        .iter()
        .map(|addr| format!("server {addr}; "))
        .collect();
    TEMPLATE
        .replace("${SECKILL_UPSTREAMS}", servers.trim_end())
        .replace("${SECKILL_LISTEN}", &listen.to_string())
}

/// Writes the configuration under `dir` and starts nginx in the foreground.
pub fn start(dir: &Path, listen: SocketAddr, upstreams: &[SocketAddr]) -> anyhow::Result<Managed> {
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::write(dir.join("seckill.conf"), render(listen, upstreams))?;
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
