//! `seckill reconcile`: asks a running service (`POST /admin/reconcile`)
//! for each product's drift between its stock counter and the durable
//! truth, and with `--repair` to set it right; prints one line per
//! product.

use anyhow::Context;

use crate::backends::flags::GatewayFlags;
use crate::lab::client::Gateway;
use crate::orders::life::reconcile::Drift;

/// `seckill reconcile`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// The gateway (or an instance) to ask.
    #[command(flatten)]
    pub gateway: GatewayFlags,
    /// Put owed units back and set each drifting counter to its truth.
    #[arg(long)]
    pub repair: bool,
    /// Only this product.
    #[arg(long)]
    pub product: Option<i64>,
    /// Print the answer as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The gateway asked without `--url`: compose's, on its default port.
const DEFAULT_URL: &str = "http://127.0.0.1:8080";

/// Runs the command: `Ok(false)` when a drift is left after a repair.
pub async fn run(args: ReconcileArgs) -> anyhow::Result<bool> {
    let url = args.gateway.url.as_deref().unwrap_or(DEFAULT_URL);
    let token = args.gateway.admin_token.as_deref();
    let token =
        token.context("reconcile needs the admin token: --admin-token or SECKILL_ADMIN_TOKEN")?;
    let target = Gateway::new(url, token, 1)?;
    let drifts = target.reconcile(args.repair, args.product).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&drifts)?);
    } else {
        print!("{}", table(&drifts));
    }
    let left = |d: &Drift| d.drift_after.unwrap_or(d.drift) != 0;
    Ok(!args.repair || !drifts.iter().any(left))
}

/// One line per product.
fn table(drifts: &[Drift]) -> String {
    let mut out = format!(
        "{:<8} {:<16} {:<9} {:>8} {:>9} {:>7} {:>6} {:>7} {:>7} {:>8} {:>8}  note\n",
        "product",
        "strategy",
        "store",
        "on_sale",
        "remaining",
        "kept",
        "owed",
        "truth",
        "drift",
        "put_back",
        "after"
    );
    for d in drifts {
        let after = d
            .drift_after
            .map_or_else(|| "-".to_owned(), |a| a.to_string());
        out.push_str(&format!(
            "{:<8} {:<16} {:<9} {:>8} {:>9} {:>7} {:>6} {:>7} {:>7} {:>8} {:>8}  {}\n",
            d.id,
            d.strategy,
            d.store.as_str(),
            d.on_sale,
            d.remaining,
            d.kept,
            d.owed,
            d.truth,
            d.drift,
            d.put_back,
            after,
            d.note.as_deref().unwrap_or("")
        ));
    }
    out
}
