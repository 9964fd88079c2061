//! Flag groups that several commands take in the same sense, declared
//! once and flattened into each (`seckill serve`, `check`, `race`,
//! `reconcile`): where the orders are, and which gateway to ask.

/// The SQL databases: PostgreSQL (products, and every order but a
/// MySQL-stored product's) and MySQL (the stock, orders and lock rows of
/// products reset with `store: mysql`).
#[derive(Debug, Clone, clap::Args)]
pub struct Databases {
    /// The PostgreSQL (`seckill lab` prints its URL); `serve` and `check`
    /// need it, `race --url` checks its histories against it.
    #[arg(long, env = "SECKILL_DATABASE_URL")]
    pub database_url: Option<String>,
    /// The MySQL (or MariaDB), when products are stored there.
    #[arg(long, env = "SECKILL_MYSQL_URL")]
    pub mysql_url: Option<String>,
}

impl Databases {
    /// The PostgreSQL's URL, for a command that cannot do without it.
    pub fn postgres(&self) -> anyhow::Result<&str> {
        self.database_url
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("--database-url (or SECKILL_DATABASE_URL) is required"))
    }
}

/// A running gateway (or one instance) and its admin token.
#[derive(Debug, Clone, clap::Args)]
pub struct GatewayFlags {
    /// A running gateway, e.g. http://127.0.0.1:8080 (`race` without it
    /// starts a lab of its own; `reconcile` asks http://127.0.0.1:8080).
    #[arg(long, env = "SECKILL_URL")]
    pub url: Option<String>,
    /// That gateway's admin token (resets and reconciliation need it).
    #[arg(long, env = "SECKILL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}
