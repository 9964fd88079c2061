//! The files generated from the catalogue are up to date: adding a
//! strategy tells you here what to regenerate.

use std::path::Path;

use seckill::cli::generated::{jmeter_csv, markdown_table, status_table};
use seckill::stock::strategy::Catalogue;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn the_jmeter_csv_is_the_catalogues() {
    assert_eq!(
        read("jmeter/strategies.csv"),
        jmeter_csv(&Catalogue::new().infos()),
        "regenerate it: cargo run -q -- strategies --format jmeter-csv > jmeter/strategies.csv"
    );
}

/// What `path` holds between its `<!-- NAME:begin … -->` line and its
/// `<!-- NAME:end -->` marker.
fn generated_part(path: &str, name: &str) -> String {
    let text = read(path);
    let begin = text
        .find(&format!("<!-- {name}:begin"))
        .and_then(|at| text[at..].find('\n').map(|nl| at + nl + 1))
        .unwrap_or_else(|| panic!("{path} has the {name}:begin marker"));
    let end = text
        .find(&format!("<!-- {name}:end -->"))
        .unwrap_or_else(|| panic!("{path} has the {name}:end marker"));
    text[begin..end].to_owned()
}

#[test]
fn the_jmeter_buyers_are_what_seckill_tokens_prints() {
    assert_eq!(
        read("jmeter/buyers.csv"),
        seckill::instance::auth::tokens::plan_buyers(),
        "regenerate it: cargo run -q -- tokens --users 2000 --prefix jm- > jmeter/buyers.csv"
    );
}

#[test]
fn the_readmes_strategy_table_is_the_catalogues() {
    assert_eq!(
        generated_part("README.md", "strategies"),
        markdown_table(&Catalogue::new().infos()),
        "regenerate the table between the markers: cargo run -q -- strategies --format markdown"
    );
}

#[test]
fn the_status_table_is_the_error_codes() {
    assert_eq!(
        generated_part("docs/http.md", "errors"),
        status_table(),
        "regenerate the table between the markers: cargo run -q -- errors"
    );
}

/// Every subcommand is in the lists that name them all: the command
/// line's module header and docs/running.md (`reconcile` and `tokens` were
/// once left out of both).
#[test]
fn every_command_is_in_the_lists_of_commands() {
    use clap::CommandFactory;
    let header = read("src/cli/mod.rs");
    let header = header.lines().next().unwrap_or_default();
    let running = read("docs/running.md");
    for command in seckill::cli::Cli::command().get_subcommands() {
        let name = command.get_name();
        if name == "help" {
            continue;
        }
        assert!(
            header.contains(&format!(" {name} ")) || header.contains(&format!(" {name}`")),
            "src/cli/mod.rs's first line leaves out `{name}`: {header}"
        );
        assert!(
            running.contains(&format!("- `seckill {name}")),
            "docs/running.md has no item for `seckill {name}`"
        );
    }
}
