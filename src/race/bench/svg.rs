//! The bench's table as a chart (`seckill bench --svg FILE`): one bar per
//! figure, as long as its operations per second, with the rate and its
//! ratio to the HTTP path beside it — the sustained-throughput table drawn.

use std::fmt::Write as _;

use super::BenchRow;
use crate::instance::chart::{SOLD, TRACK, escape};

/// Layout, as in the comparison chart: a character width no glyph of the
/// 13 px font exceeds sizes the label column and the chart's width.
const CHAR_W: f64 = 8.0;
const BARS_W: f64 = 420.0;
const ROW_H: f64 = 26.0;
const TOP: f64 = 34.0;

/// A figure's label: its name, with the per-buyer limit of a strategy.
fn label(row: &BenchRow) -> String {
    match row.per_user_limit {
        Some(limit) => format!("{} (limit {limit})", row.name),
        None => row.name.clone(),
    }
}

/// The numbers beside a bar.
fn numbers(row: &BenchRow) -> String {
    format!(
        "{:.0} ops/s · {:.2}× http · p99 {:.0} ms",
        row.ops_per_sec, row.vs_http, row.p99_ms
    )
}

/// The chart as a standalone SVG document. Baselines (no limit) are drawn
/// grey, strategies green.
pub fn svg(title: &str, rows: &[BenchRow]) -> String {
    let widest = |text: &dyn Fn(&BenchRow) -> String| {
        rows.iter()
            .map(|r| text(r).chars().count())
            .max()
            .unwrap_or(0) as f64
            * CHAR_W
    };
    let label_w = (8.0 + widest(&label) + 12.0).max(120.0);
    let width = (label_w + BARS_W + 12.0 + widest(&numbers) + 8.0).ceil();
    let height = TOP + ROW_H * rows.len().max(1) as f64 + 12.0;
    let top = rows.iter().map(|r| r.ops_per_sec).fold(1.0, f64::max);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{t}"><rect width="100%" height="100%" fill="#ffffff"/><text x="8" y="20" font-size="15" font-weight="bold">{t}</text>"##,
        t = escape(title)
    );
    for (i, row) in rows.iter().enumerate() {
        let y = TOP + ROW_H * i as f64;
        let fill = if row.per_user_limit.is_some() {
            SOLD
        } else {
            TRACK
        };
        let _ = write!(
            out,
            r#"<g class="figure" data-name="{name}"><text x="8" y="{ty}">{label}</text><rect x="{label_w}" y="{by}" width="{w:.1}" height="16" fill="{fill}"/><text x="{nx}" y="{ty}">{numbers}</text></g>"#,
            name = escape(&row.name),
            ty = y + 13.0,
            by = y + 1.0,
            label = escape(&label(row)),
            w = BARS_W * row.ops_per_sec / top,
            nx = label_w + BARS_W + 12.0,
            numbers = escape(&numbers(row)),
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, limit: Option<u32>, ops: f64) -> BenchRow {
        BenchRow {
            name: name.into(),
            per_user_limit: limit,
            ops_per_sec: ops,
            ok_per_sec: ops,
            p50_ms: 1.0,
            p99_ms: 2.0,
            vs_http: ops / 1000.0,
            vs_redis: 0.1,
            vs_postgres: 10.0,
            history_ok: None,
            oversold: None,
            mean_group: None,
            reaper_lag_ms: None,
            errors: Default::default(),
            cpu_us: Default::default(),
            redis_us: Default::default(),
            writer_batch: None,
        }
    }

    #[test]
    fn each_figure_is_a_bar_as_long_as_its_rate() {
        let chart = svg(
            "t",
            &[row("http", None, 1000.0), row("redis-lua", Some(1), 500.0)],
        );
        assert_eq!(chart.matches(r#"class="figure""#).count(), 2);
        assert!(chart.contains(r#"width="420.0""#) && chart.contains(r#"width="210.0""#));
        assert!(chart.contains("redis-lua (limit 1)") && chart.contains("0.50× http"));
    }
}
