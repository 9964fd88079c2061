//! The comparison as a terminal table, and the race's verdict.

use super::driver::Row;

/// The rows as an aligned table; safe strategies are marked `*`.
pub fn render(rows: &[Row], safe: &[String]) -> String {
    let mut out = format!(
        "{:<16} {:>7} {:>7} {:>9} {:>8} {:>6} {:>9} {:>9} {:>8} {:>8}  errors\n",
        "strategy",
        "initial",
        "sold",
        "client_ok",
        "oversold",
        "lost",
        "remaining",
        "rps",
        "p50_ms",
        "p99_ms"
    );
    for row in rows {
        let mark = if safe.contains(&row.strategy) {
            "*"
        } else {
            " "
        };
        let errors: Vec<String> = row.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
        out.push_str(&format!(
            "{:<16} {:>7} {:>7} {:>9} {:>8} {:>6} {:>9} {:>9.0} {:>8.2} {:>8.2}  {}\n",
            format!("{}{mark}", row.strategy),
            row.initial,
            row.sold,
            row.client_ok,
            row.oversold,
            row.lost_updates,
            row.remaining,
            row.rps,
            row.p50_ms,
            row.p99_ms,
            errors.join(" ")
        ));
    }
    out.push_str("* = expected safe (must not oversell)\n");
    out
}

/// `true` unless a safe strategy oversold or client 200s differ from
/// recorded orders; each failure is named on stderr.
pub fn verdict(rows: &[Row], safe: &[String]) -> bool {
    let mut ok = true;
    for row in rows {
        if safe.contains(&row.strategy) && row.oversold > 0 {
            eprintln!(
                "FAIL {}: expected safe, oversold {}",
                row.strategy, row.oversold
            );
            ok = false;
        }
        if row.client_ok != row.sold {
            eprintln!(
                "FAIL {}: clients saw {} sales but {} orders were recorded",
                row.strategy, row.client_ok, row.sold
            );
            ok = false;
        }
    }
    ok
}
