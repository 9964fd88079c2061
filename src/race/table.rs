//! The race's rows as an aligned terminal table (plain races and scenarios
//! alike), and the plain race's verdict.

use super::driver::Row;
use super::payer::LifeOutcome;
use super::scenario::ScenarioRow;

/// A column: its header, its width, and whether it is left-aligned.
type Column = (&'static str, usize, bool);

/// The columns every table shares, after its own leading ones.
const RACE: [Column; 12] = [
    ("initial", 7, false),
    ("sold", 7, false),
    ("kept", 7, false),
    ("client_ok", 9, false),
    ("unknown", 7, false),
    ("history", 7, true),
    ("oversold", 8, false),
    ("lost", 6, false),
    ("remaining", 9, false),
    ("rps", 9, false),
    ("p50_ms", 8, false),
    ("p99_ms", 8, false),
];

/// The shared columns' cells of one row.
fn race_cells(row: &Row) -> Vec<String> {
    vec![
        row.initial.to_string(),
        row.sold.to_string(),
        row.kept.to_string(),
        row.client_ok.to_string(),
        row.unknown.to_string(),
        match row.history_ok {
            Some(true) => "ok".to_owned(),
            Some(false) => "FAIL".to_owned(),
            None => "-".to_owned(),
        },
        row.oversold.to_string(),
        row.lost_updates.to_string(),
        row.remaining.to_string(),
        format!("{:.0}", row.rps),
        format!("{:.2}", row.p50_ms),
        format!("{:.2}", row.p99_ms),
    ]
}

/// The error codes, then what the history check found.
fn errors(row: &Row) -> String {
    let mut parts: Vec<String> = row.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.extend(
        row.violations
            .iter()
            .map(|(k, v)| format!("VIOLATION {k}={v}")),
    );
    if row.unknown_sold > 0 {
        parts.push(format!("(unknown that sold: {})", row.unknown_sold));
    }
    if let Some(life) = &row.life {
        parts.push(life_cells(life));
    }
    if let Some(opening) = &row.opening {
        parts.push(format!("opening: {} early", opening.early));
        if opening.reserved > 0 {
            parts.push(format!("{} reserved", opening.reserved));
        }
        if let Some(ms) = opening.last_sale_ms {
            parts.push(format!("last sale {ms} ms after it"));
        }
        if opening.sold_early > 0 {
            parts.push(format!("{} SOLD BEFORE IT", opening.sold_early));
        }
    }
    parts.join(" ")
}

/// Lays out `lines` (cells, then free text) under `columns`.
fn layout(columns: &[Column], tail: &str, lines: &[(Vec<String>, String)]) -> String {
    let line = |cells: &[String], text: &str| {
        let mut out = String::new();
        for ((_, width, left), cell) in columns.iter().zip(cells) {
            if *left {
                out.push_str(&format!("{cell:<width$} "));
            } else {
                out.push_str(&format!("{cell:>width$} "));
            }
        }
        format!("{} {text}\n", out.trim_end())
    };
    let headers: Vec<String> = columns.iter().map(|(h, _, _)| h.to_string()).collect();
    let mut out = line(&headers, tail);
    for (cells, text) in lines {
        out.push_str(&line(cells, text));
    }
    out
}

/// The strategy column's width: 16, or the longest label (a recipe's,
/// `zookeeper:semaphore-mutex`) and its `*`.
fn label_width<'a>(labels: impl Iterator<Item = &'a String>) -> usize {
    labels.map(|l| l.len() + 1).max().unwrap_or(0).max(16)
}

/// A plain race's rows; safe strategies are marked `*`.
pub fn render(rows: &[Row], safe: &[String]) -> String {
    let mut columns = vec![(
        "strategy",
        label_width(rows.iter().map(|r| &r.strategy)),
        true,
    )];
    columns.extend(RACE);
    let lines: Vec<(Vec<String>, String)> = rows
        .iter()
        .map(|row| {
            let mark = if row.expected_safe(safe) { "*" } else { "" };
            let mut cells = vec![format!("{}{mark}", row.strategy)];
            cells.extend(race_cells(row));
            (cells, errors(row))
        })
        .collect();
    let mut out = layout(&columns, " errors", &lines);
    out.push_str("* = expected safe (must not oversell)\n");
    if rows.iter().any(|r| r.life.is_some()) {
        out.push_str(
            "with holds: sold = holds made, kept = held + paid (what the stock is measured by)\n",
        );
    }
    out
}

/// `--repeat N`: one line per strategy over its N races — how many held
/// (no oversell for a safe strategy, a clean history check), the worst
/// oversell, the unknown outcomes, and the spread of throughput.
pub fn render_repeats(rows: &[Row], safe: &[String]) -> String {
    let columns = [
        (
            "strategy",
            label_width(rows.iter().map(|r| &r.strategy)),
            true,
        ),
        ("races", 5, false),
        ("held", 5, false),
        ("max_oversold", 12, false),
        ("unknown", 7, false),
        ("min_rps", 9, false),
        ("median_rps", 10, false),
        ("max_rps", 9, false),
    ];
    let mut order: Vec<&str> = Vec::new();
    for row in rows {
        if !order.contains(&row.strategy.as_str()) {
            order.push(&row.strategy);
        }
    }
    let lines: Vec<(Vec<String>, String)> = order
        .iter()
        .map(|strategy| {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.strategy == *strategy).collect();
            let is_safe = mine.iter().all(|r| r.expected_safe(safe));
            let held = mine.iter().filter(|r| held(r, is_safe)).count();
            let mut rps: Vec<f64> = mine.iter().map(|r| r.rps).collect();
            rps.sort_by(f64::total_cmp);
            let mark = if is_safe { "*" } else { "" };
            let cells = vec![
                format!("{strategy}{mark}"),
                mine.len().to_string(),
                held.to_string(),
                mine.iter()
                    .map(|r| r.oversold)
                    .max()
                    .unwrap_or(0)
                    .to_string(),
                mine.iter().map(|r| r.unknown).sum::<i64>().to_string(),
                format!("{:.0}", rps.first().copied().unwrap_or(0.0)),
                format!("{:.0}", rps.get(rps.len() / 2).copied().unwrap_or(0.0)),
                format!("{:.0}", rps.last().copied().unwrap_or(0.0)),
            ];
            (cells, String::new())
        })
        .collect();
    let mut out = layout(&columns, "", &lines);
    out.push_str("* = expected safe; held = no oversell (safe ones) and history ok\n");
    out
}

/// Whether one race held: its history checked clean (or unchecked but
/// honest), and, for a safe strategy, nothing oversold.
fn held(row: &Row, safe: bool) -> bool {
    let history = match row.history_ok {
        Some(_) => {
            crate::judge::check::truthful(&row.violations) && (!safe || row.violations.is_empty())
        }
        None => row.client_ok == row.sold,
    };
    history && (!safe || row.oversold == 0)
}

/// A scenario run: the race columns plus the variant, expected and met.
pub fn render_scenarios(rows: &[ScenarioRow]) -> String {
    let mut columns = vec![
        ("scenario", 24, true),
        ("strategy", 16, true),
        ("variant", 14, true),
    ];
    columns.extend(RACE);
    columns.push(("met", 5, true));
    let lines: Vec<(Vec<String>, String)> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.scenario.clone(),
                r.row.strategy.clone(),
                r.variant.clone(),
            ];
            cells.extend(race_cells(&r.row));
            cells.push(if r.met { "yes" } else { "NO" }.to_owned());
            let masters: String = r
                .masters
                .iter()
                .map(|m| {
                    format!(
                        " / {}: {} commands ({:.0}%), {} sales",
                        m.master,
                        m.commands,
                        m.share * 100.0,
                        m.sales
                    )
                })
                .collect();
            let reconciled = r
                .reconciled
                .as_ref()
                .map(|d| {
                    let after = d.drift_after.map_or_else(|| "-".into(), |a| a.to_string());
                    format!(
                        " / reconcile: drift {} (counter {}, truth {}), after repair {after}",
                        d.drift, d.remaining, d.truth
                    )
                })
                .unwrap_or_default();
            let window = r
                .window
                .as_ref()
                .map(|w| {
                    format!(
                        " / window: sold open={} resumed={} paused={} closed={}; refused paused={} closed={}; paid after close={}; pause/resume/close took {:?} ms",
                        w.sold_open,
                        w.sold_resumed,
                        w.sold_paused,
                        w.sold_closed,
                        w.refused_paused,
                        w.refused_closed,
                        w.paid_after_close,
                        w.operator_ms
                    )
                })
                .unwrap_or_default();
            (
                cells,
                format!(
                    "{} / {}{masters}{reconciled}{window}",
                    r.expected,
                    errors(&r.row)
                ),
            )
        })
        .collect();
    layout(&columns, "expected / errors", &lines)
}

/// A row's order life, after its errors.
fn life_cells(life: &LifeOutcome) -> String {
    let mut text = format!(
        "/ {}: held={} paid={} expired={} returned={} stranded={} paid_and_returned={} \
         owed={} drift={} pays: ok={} expired={}",
        life.giveback,
        life.held,
        life.paid,
        life.expired,
        life.returned,
        life.stranded,
        life.paid_and_returned,
        life.owed,
        life.drift,
        life.pays_ok,
        life.pays_expired
    );
    if life.cancels_ok > 0 {
        text.push_str(&format!(" cancels={}", life.cancels_ok));
    }
    if life.giveback_seen + life.giveback_unseen > 0 {
        text.push_str(&format!(
            " given back: seen={} unseen={}",
            life.giveback_seen, life.giveback_unseen
        ));
    }
    if let Some(ms) = life.giveback_max_ms {
        text.push_str(&format!(", at most {ms} ms past due"));
    }
    if let Some(ms) = life.all_paid_ms {
        text.push_str(&format!(", all paid after {ms} ms"));
    }
    text
}

/// `true` unless a safe strategy oversold or client 200s differ from
/// recorded orders; each failure is named on stderr.
pub fn verdict(rows: &[Row], safe: &[String]) -> bool {
    let mut ok = true;
    for row in rows {
        if row.expected_safe(safe) && row.oversold > 0 {
            eprintln!(
                "FAIL {}: expected safe, oversold {}",
                row.strategy, row.oversold
            );
            ok = false;
        }
        if row.client_ok + row.unknown_sold != row.sold {
            eprintln!(
                "FAIL {}: clients saw {} sales (and {} unknown outcomes that sold) but {} orders were recorded",
                row.strategy, row.client_ok, row.unknown_sold, row.sold
            );
            ok = false;
        }
        if row.history_ok == Some(false) {
            eprintln!(
                "FAIL {}: the history check found {:?}",
                row.strategy, row.violations
            );
            ok = false;
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A race of redis-lua with holds given back by `giveback` that kept
    /// one unit past the stock at one instant.
    fn oversold_under(giveback: &str) -> Row {
        Row {
            strategy: "redis-lua".into(),
            initial: 10,
            sold: 11,
            client_ok: 11,
            oversold: 1,
            history_ok: Some(true),
            life: Some(LifeOutcome {
                giveback: giveback.into(),
                ..LifeOutcome::default()
            }),
            ..Row::default()
        }
    }

    #[test]
    fn the_naive_give_back_is_not_held_to_the_strategys_safety() {
        let safe = vec!["redis-lua".to_owned()];
        let naive = oversold_under("naive-cron");
        assert!(!naive.expected_safe(&safe));
        assert!(verdict(std::slice::from_ref(&naive), &safe));
        let repeats = render_repeats(&[naive.clone(), naive], &safe);
        assert!(repeats.contains("redis-lua "), "{repeats}");
        assert!(!repeats.contains("redis-lua*"), "{repeats}");
        let checked = oversold_under("state-machine");
        assert!(checked.expected_safe(&safe));
        assert!(!verdict(&[checked], &safe));
    }
}
