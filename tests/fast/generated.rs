//! The files generated from the catalogue are up to date: adding a
//! strategy tells you here what to regenerate.

use std::path::Path;

use seckill::generated::{jmeter_csv, markdown_table, status_table};
use seckill::strategy::Catalogue;

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

#[test]
fn the_readmes_strategy_table_is_the_catalogues() {
    let readme = read("README.md");
    let begin = readme
        .find("<!-- strategies:begin")
        .and_then(|at| readme[at..].find('\n').map(|nl| at + nl + 1))
        .expect("README has the strategies:begin marker");
    let end = readme
        .find("<!-- strategies:end -->")
        .expect("README has the strategies:end marker");
    assert_eq!(
        &readme[begin..end],
        markdown_table(&Catalogue::new().infos()),
        "regenerate the table between the markers: cargo run -q -- strategies --format markdown"
    );
}

#[test]
fn the_status_table_is_the_error_codes() {
    let http = read("docs/http.md");
    let begin = http
        .find("<!-- errors:begin")
        .and_then(|at| http[at..].find('\n').map(|nl| at + nl + 1))
        .expect("docs/http.md has the errors:begin marker");
    let end = http
        .find("<!-- errors:end -->")
        .expect("docs/http.md has the errors:end marker");
    assert_eq!(
        &http[begin..end],
        status_table(),
        "regenerate the table between the markers: cargo run -q -- errors"
    );
}
