//! The command line: `seckill serve | lab | race | bench | check | reconcile | report | strategies | tokens | errors` (a test holds this list, and docs/running.md's, to the subcommands).

pub mod drift;
pub mod generated;

use clap::{Parser, Subcommand};

use crate::cli::drift::ReconcileArgs;
use crate::cli::generated::StrategiesArgs;
use crate::instance::auth::tokens::TokensArgs;
use crate::instance::serve::ServeArgs;
use crate::judge::check::CheckArgs;
use crate::judge::report::ReportArgs;
use crate::lab::LabArgs;
use crate::race::RaceArgs;
use crate::race::bench::BenchArgs;

/// How the logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line per event, for a person.
    Text,
    /// One JSON object per event, for a log collector.
    Json,
}

/// seckill — a flash-sale inventory backend and a laboratory of the ways to
/// protect a hot stock counter.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
pub struct Cli {
    /// Log format.
    #[arg(
        long,
        env = "SECKILL_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        global = true
    )]
    pub log_format: LogFormat,
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one instance: the HTTP API, its order writer, migrations at
    /// start-up. Needs Redis, PostgreSQL and an admin token.
    Serve(ServeArgs),
    /// Start the whole topology natively (Redis, PostgreSQL, N instances,
    /// nginx) on free loopback ports; print the gateway URL and admin
    /// token; tear everything down on Ctrl-C.
    Lab(LabArgs),
    /// Race every strategy (or --strategies) with many concurrent buyers
    /// and print the oversell comparison. Exits 1 if a safe strategy
    /// oversold or client 200s differ from recorded orders.
    Race(RaceArgs),
    /// Turn a race's JSON (or a live gateway's /report) into one
    /// self-contained HTML page with the comparison chart, and optionally
    /// the chart alone as SVG.
    Report(ReportArgs),
    /// Measure sustained throughput in a lab of its own: the chosen
    /// strategies (with and without a per-buyer limit) next to the HTTP
    /// path, Redis and PostgreSQL alone, each as a ratio to those
    /// baselines. Exits 1 if a strategy's history check failed.
    Bench(BenchArgs),
    /// Check a race history (`seckill race --history FILE`) against the
    /// orders in PostgreSQL: every 200 one durable order, every order a
    /// 200 or an unknown outcome, and for safe strategies no oversell, no
    /// unit sold twice, no buyer over the limit. Exits 1 on a violation.
    Check(CheckArgs),
    /// Compare each product's stock counter with the durable truth (units
    /// on sale less those held, paid or owed back) through a running
    /// service; `--repair` sets it right without selling what is held.
    /// Exits 1 when a repair leaves a drift.
    Reconcile(ReconcileArgs),
    /// Print the strategy catalogue (no server needed): as text, as JSON,
    /// as the README's table or as JMeter's strategies.csv.
    Strategies(StrategiesArgs),
    /// Print signed buyer tokens (`user,token` lines) for an instance
    /// with `--buyer-auth token`: for JMeter's plans and other drivers.
    Tokens(TokensArgs),
    /// Print the contract's error codes as docs/http.md's status table
    /// (markdown; no server needed).
    Errors,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn the_race_help_names_every_scenario() {
        let cli = Cli::command();
        let race = cli.find_subcommand("race").expect("race");
        let values: Vec<String> = race
            .get_arguments()
            .find(|a| a.get_id() == "scenario")
            .expect("--scenario")
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_owned())
            .collect();
        for scenario in crate::model::info::Scenario::ALL {
            assert!(
                values.iter().any(|v| v == scenario.name()),
                "--scenario does not take {}",
                scenario.name()
            );
        }
        assert!(values.iter().any(|v| v == "all"));
    }
}
