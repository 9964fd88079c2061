//! What the code writes for the world outside it: the README's strategy
//! table and JMeter's `jmeter/strategies.csv` from the catalogue (`seckill
//! strategies --format markdown|jmeter-csv`), and docs/http.md's status
//! table from the error codes (`seckill errors`). A test compares the
//! committed copies with what this build generates, so adding a strategy
//! or a code is enough to know what to regenerate.

use crate::model::error::ErrorCode;
use crate::model::info::{Expect, Hazard, Info};

/// The first JMeter product id; strategy `i` of the catalogue sells
/// product `JMETER_FIRST_PRODUCT + i`.
pub const JMETER_FIRST_PRODUCT: i64 = 9101;
/// Simulated work per sale in the JMeter comparison: wide enough that the
/// unsafe strategies' windows are hit on every run.
pub const JMETER_WORK_MS: u64 = 50;
/// The lease the JMeter comparison gives a strategy that is unsafe only
/// once work outlives its lease: shorter than the work, so its failure
/// shows; everybody else keeps the default.
pub const JMETER_SHORT_LEASE_MS: u64 = 20;

/// The lease JMeter races `info` with: short for a strategy that is unsafe
/// but does not oversell under plain contention, and oversells when its
/// lease expires (its failure needs the short lease to show).
pub fn jmeter_lease_ms(info: &Info) -> u64 {
    let shows_only_past_its_lease = !info.safe
        && info.expect(Hazard::Contention) != Some(Expect::Oversells)
        && info.expect(Hazard::LeaseExpiry) == Some(Expect::Oversells);
    if shows_only_past_its_lease {
        JMETER_SHORT_LEASE_MS
    } else {
        crate::model::product::Settings::default().lease_ms
    }
}

/// `jmeter/strategies.csv`: one product per strategy, in catalogue order.
pub fn jmeter_csv(infos: &[&Info]) -> String {
    let mut out = String::from("product,strategy,work_ms,lease_ms\n");
    for (i, info) in infos.iter().enumerate() {
        out.push_str(&format!(
            "{},{},{JMETER_WORK_MS},{}\n",
            JMETER_FIRST_PRODUCT + i as i64,
            info.id,
            jmeter_lease_ms(info)
        ));
    }
    out
}

/// The README's strategy table (Markdown).
pub fn markdown_table(infos: &[&Info]) -> String {
    let mut out = String::from(
        "| id | backend | stock in (`store`) | mechanism | safe | survives | fails under |\n|---|---|---|---|---|---|---|\n",
    );
    for info in infos {
        let stores: Vec<&str> = info.stores.iter().map(|s| s.as_str()).collect();
        let recipes: Vec<&str> = info.recipes.iter().map(|r| r.as_str()).collect();
        let mechanism = match recipes.is_empty() {
            true => info.mechanism.to_owned(),
            false => format!("{}; `recipe`: {}", info.mechanism, recipes.join(", ")),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} |\n",
            info.id,
            info.backend,
            stores.join(", "),
            mechanism.replace('|', "\\|"),
            if info.safe { "yes" } else { "**no**" },
            info.safe_against,
            info.unsafe_against,
        ));
    }
    out
}

/// A plain-text list for the terminal.
pub fn text_table(infos: &[&Info]) -> String {
    let mut out = format!("{:<16} {:<12} {:<5} mechanism\n", "id", "backend", "safe");
    for info in infos {
        out.push_str(&format!(
            "{:<16} {:<12} {:<5} {}\n",
            info.id,
            info.backend,
            if info.safe { "yes" } else { "no" },
            info.mechanism
        ));
    }
    out
}

/// `seckill strategies`' flags.
#[derive(Debug, Clone, clap::Args)]
pub struct StrategiesArgs {
    /// How to print the catalogue.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// What `seckill strategies` prints: a closed choice, so clap lists the
/// values in `--help` and refuses any other before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for a terminal.
    Text,
    /// As `GET /strategies` answers.
    Json,
    /// The README's strategy table.
    Markdown,
    /// `jmeter/strategies.csv`, the plans' strategy list.
    JmeterCsv,
}

/// docs/http.md's status table: every error code with its status and what
/// it tells a client.
pub fn status_table() -> String {
    let mut out = String::from("| status | code | what it means |\n|---|---|---|\n");
    for code in ErrorCode::ALL {
        out.push_str(&format!(
            "| {} | `{}` | {} |\n",
            code.status().as_u16(),
            code.as_str(),
            code.means()
        ));
    }
    out
}

/// Prints the catalogue in the asked format.
pub fn run(args: &StrategiesArgs) -> anyhow::Result<()> {
    let infos = crate::stock::strategy::Catalogue::new().infos();
    let text = match args.format {
        Format::Text => text_table(&infos),
        Format::Json => serde_json::to_string_pretty(&infos)? + "\n",
        Format::Markdown => markdown_table(&infos),
        Format::JmeterCsv => jmeter_csv(&infos),
    };
    print!("{text}");
    Ok(())
}
