//! The comparison as an SVG bar chart: one row per race (or product), the
//! stock as a grey track, the units kept within it in green and the units
//! kept beyond it — the oversell — in red past the track's end, with
//! throughput, p99 and the scenario's verdict beside it. A unit is kept by
//! an order that holds it: every order, or with holds the held and paid
//! ones; a hold given back is told apart in the numbers, never drawn as a
//! sale past the stock (a unit held, given back and sold again is one).
//!
//! One renderer for every place the chart appears: `seckill report`'s HTML
//! and SVG files, and the live dashboard (which fetches
//! `/report?format=svg`). Each bar carries `data-*` attributes with its
//! numbers, so a test (or a script) can read the chart back.

use std::fmt::Write;

use crate::orders::ledger::Ledger;

/// One row of the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// What the row is: the strategy, with the scenario and variant when
    /// there are some.
    pub label: String,
    /// The strategy id alone.
    pub strategy: String,
    /// Stock at the reset.
    pub initial: i64,
    /// Units the orders keep (the ledger's `kept`).
    pub kept: i64,
    /// With holds: units given back on sale (`None` without holds).
    pub given_back: Option<i64>,
    /// Units kept beyond the stock.
    pub oversold: i64,
    /// Requests per second, when a driver measured it.
    pub rps: Option<f64>,
    /// 99th percentile latency in ms, when measured.
    pub p99_ms: Option<f64>,
    /// A scenario's expectation and whether it was met.
    pub verdict: Option<Verdict>,
}

/// A scenario's expectation for a row.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The scenario the row belongs to.
    pub scenario: String,
    /// The outcome predicted, in words.
    pub expected: String,
    /// Whether it happened.
    pub met: bool,
}

impl Verdict {
    /// ✓ when met, ✗ when not: the chart and the table show the same mark.
    pub fn mark(&self) -> &'static str {
        if self.met { "✓" } else { "✗" }
    }
}

impl Bar {
    /// A row from a product's ledger (the live `/report`).
    pub fn from_ledger(ledger: &Ledger) -> Self {
        Self {
            label: format!("{} #{}", ledger.strategy, ledger.id),
            strategy: ledger.strategy.clone(),
            initial: ledger.initial,
            kept: ledger.kept,
            given_back: (ledger.settings.pay_within_ms > 0).then_some(ledger.returned),
            oversold: ledger.oversold,
            rps: None,
            p99_ms: None,
            verdict: None,
        }
    }
}

/// Colours: a neutral track, green for sales within the stock, a warning
/// red for the oversell.
pub const TRACK: &str = "#d1d5db";
/// Sales within the stock.
pub const SOLD: &str = "#16a34a";
/// Sales beyond the stock.
pub const OVERSOLD: &str = "#dc2626";

const WIDTH: f64 = 980.0;
const LABEL_W: f64 = 230.0;
const BARS_W: f64 = 420.0;
/// At least the width of one character of the chart's 13 px sans-serif
/// (digits and most letters are narrower): the label column and the
/// chart are sized with it, so no text runs into the bars or past the
/// edge.
const CHAR_W: f64 = 8.0;
const ROW_H: f64 = 30.0;
const TOP: f64 = 44.0;

/// The largest stock or sale of any bar: the length the bars are drawn to.
fn scale_max(bars: &[Bar]) -> f64 {
    bars.iter()
        .map(|b| b.initial.max(b.kept))
        .max()
        .unwrap_or(1)
        .max(1) as f64
}

/// The chart as a standalone SVG document.
pub fn svg(title: &str, bars: &[Bar]) -> String {
    let unit = BARS_W / scale_max(bars);
    let height = TOP + ROW_H * bars.len().max(1) as f64 + 16.0;
    let widest = |text: &dyn Fn(&Bar) -> String| {
        bars.iter()
            .map(|b| text(b).chars().count())
            .max()
            .unwrap_or(0) as f64
            * CHAR_W
    };
    // The labels' column fits the longest label; the chart, the longest
    // numbers beside a bar.
    let label_w = LABEL_W.max(8.0 + widest(&|b| b.label.clone()) + 12.0);
    let width = WIDTH
        .max(label_w + BARS_W + 12.0 + widest(&describe) + 8.0)
        .ceil();
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13" role="img" aria-label="{title}">"#,
        title = escape(title)
    );
    let _ = write!(
        out,
        r##"<rect width="100%" height="100%" fill="#ffffff"/><text x="8" y="20" font-size="15" font-weight="bold">{title}</text>"##,
        title = escape(title)
    );
    legend(&mut out, label_w);
    if bars.is_empty() {
        let _ = write!(
            out,
            r##"<text x="8" y="{y}" fill="#6b7280">no products yet: reset one and buy</text>"##,
            y = TOP + 18.0
        );
    }
    for (i, bar) in bars.iter().enumerate() {
        row(&mut out, bar, TOP + ROW_H * i as f64, unit, label_w);
    }
    out.push_str("</svg>");
    out
}

fn legend(out: &mut String, label_w: f64) {
    let items = [
        (TRACK, "stock"),
        (SOLD, "kept within stock"),
        (OVERSOLD, "oversold"),
    ];
    let mut x = label_w;
    for (colour, text) in items {
        let _ = write!(
            out,
            r#"<rect x="{x}" y="28" width="12" height="10" fill="{colour}"/><text x="{tx}" y="37" font-size="11">{text}</text>"#,
            tx = x + 16.0
        );
        x += 30.0 + 7.0 * text.len() as f64;
    }
}

fn row(out: &mut String, bar: &Bar, y: f64, unit: f64, label_w: f64) {
    let within = bar.kept.min(bar.initial).max(0) as f64;
    let beyond = (bar.kept - bar.initial).max(0) as f64;
    let _ = write!(
        out,
        r#"<g class="bar" data-label="{label}" data-strategy="{strategy}" data-initial="{initial}" data-kept="{kept}" data-given-back="{given_back}" data-oversold="{oversold}">"#,
        label = escape(&bar.label),
        strategy = escape(&bar.strategy),
        initial = bar.initial,
        kept = bar.kept,
        given_back = bar.given_back.unwrap_or(0),
        oversold = bar.oversold,
    );
    let _ = write!(
        out,
        r#"<text x="8" y="{ty}">{label}</text><rect x="{label_w}" y="{by}" width="{tw:.1}" height="18" fill="{TRACK}"/><rect x="{label_w}" y="{by}" width="{sw:.1}" height="18" fill="{SOLD}"/>"#,
        ty = y + 14.0,
        by = y + 1.0,
        label = escape(&bar.label),
        tw = bar.initial.max(0) as f64 * unit,
        sw = within * unit,
    );
    if beyond > 0.0 {
        let _ = write!(
            out,
            r#"<rect x="{ox:.1}" y="{by}" width="{ow:.1}" height="18" fill="{OVERSOLD}"/>"#,
            ox = label_w + bar.initial.max(0) as f64 * unit,
            by = y + 1.0,
            ow = beyond * unit,
        );
    }
    let _ = write!(
        out,
        r#"<text x="{x}" y="{ty}">{text}</text></g>"#,
        x = label_w + BARS_W + 12.0,
        ty = y + 14.0,
        text = escape(&describe(bar)),
    );
}

/// Width of the chart for a phone: the page's 375 px less its margins.
pub const NARROW_W: f64 = 340.0;
/// The narrow chart's text size, and a character width no glyph of it
/// exceeds (as [`CHAR_W`] for the wide chart).
const NARROW_FONT: f64 = 12.0;
const NARROW_CHAR_W: f64 = 7.4;
const LINE_H: f64 = 15.0;

/// The same chart for a phone: each row's label on its own lines above a
/// bar as wide as the chart, its numbers on lines below, every text
/// wrapped at spaces to the chart's width, so nothing needs a wide screen
/// and nothing is cut off. Rows are `g.bar-narrow` with the same data
/// attributes as the wide chart's.
pub fn svg_narrow(title: &str, bars: &[Bar]) -> String {
    let chars = ((NARROW_W - 16.0) / NARROW_CHAR_W).floor() as usize;
    let unit = (NARROW_W - 16.0) / scale_max(bars);
    let title_lines = wrap(title, chars);
    let mut y = 8.0 + LINE_H * title_lines.len() as f64;
    let mut rows = String::new();
    for bar in bars {
        let label = wrap(&bar.label, chars);
        let numbers = wrap(&describe(bar), chars);
        let _ = write!(
            rows,
            r#"<g class="bar-narrow" data-label="{label}" data-strategy="{strategy}" data-initial="{initial}" data-kept="{kept}" data-given-back="{given_back}" data-oversold="{oversold}">"#,
            label = escape(&bar.label),
            strategy = escape(&bar.strategy),
            initial = bar.initial,
            kept = bar.kept,
            given_back = bar.given_back.unwrap_or(0),
            oversold = bar.oversold,
        );
        for line in &label {
            y += LINE_H;
            let _ = write!(rows, r#"<text x="8" y="{y}">{}</text>"#, escape(line));
        }
        let within = bar.kept.min(bar.initial).max(0) as f64 * unit;
        let track = bar.initial.max(0) as f64 * unit;
        let beyond = (bar.kept - bar.initial).max(0) as f64 * unit;
        let by = y + 4.0;
        let _ = write!(
            rows,
            r#"<rect x="8" y="{by}" width="{track:.1}" height="12" fill="{TRACK}"/><rect x="8" y="{by}" width="{within:.1}" height="12" fill="{SOLD}"/>"#
        );
        if beyond > 0.0 {
            let _ = write!(
                rows,
                r#"<rect x="{x:.1}" y="{by}" width="{beyond:.1}" height="12" fill="{OVERSOLD}"/>"#,
                x = 8.0 + track
            );
        }
        y += 16.0;
        for line in &numbers {
            y += LINE_H;
            let _ = write!(
                rows,
                r##"<text x="8" y="{y}" fill="#374151">{}</text>"##,
                escape(line)
            );
        }
        rows.push_str("</g>");
        y += 8.0;
    }
    let height = (y + 8.0).ceil();
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{NARROW_W}" height="{height}" viewBox="0 0 {NARROW_W} {height}" font-family="sans-serif" font-size="{NARROW_FONT}" role="img" aria-label="{title}"><rect width="100%" height="100%" fill="#ffffff"/>"##,
        title = escape(title)
    );
    for (i, line) in title_lines.iter().enumerate() {
        let _ = write!(
            out,
            r#"<text x="8" y="{ty}" font-weight="bold">{}</text>"#,
            escape(line),
            ty = 8.0 + LINE_H * (i + 1) as f64
        );
    }
    out.push_str(&rows);
    out.push_str("</svg>");
    out
}

/// `text` in lines of at most `chars` characters, broken at spaces (a
/// word longer than a line is broken where it must be).
fn wrap(text: &str, chars: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > chars {
            if !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            lines.push(word.drain(..chars).collect());
        }
        let word: String = word.into_iter().collect();
        let needed = line.chars().count() + usize::from(!line.is_empty()) + word.chars().count();
        if needed > chars && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The numbers beside a bar.
fn describe(bar: &Bar) -> String {
    let mut parts = vec![match bar.given_back {
        None => format!("{}/{} sold", bar.kept, bar.initial),
        Some(back) => format!("{}/{} kept · {back} given back", bar.kept, bar.initial),
    }];
    if bar.oversold > 0 {
        parts.push(format!("+{} oversold", bar.oversold));
    }
    if let Some(rps) = bar.rps {
        parts.push(format!("{rps:.0} rps"));
    }
    if let Some(p99) = bar.p99_ms {
        parts.push(format!("p99 {p99:.0} ms"));
    }
    if let Some(verdict) = &bar.verdict {
        parts.push(verdict.mark().to_owned());
    }
    parts.join(" · ")
}

/// Escapes text for XML and HTML.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(strategy: &str, initial: i64, kept: i64) -> Bar {
        Bar {
            label: strategy.into(),
            strategy: strategy.into(),
            initial,
            kept,
            given_back: None,
            oversold: (kept - initial).max(0),
            rps: Some(1000.0),
            p99_ms: Some(12.0),
            verdict: None,
        }
    }

    #[test]
    fn the_oversell_is_drawn_past_the_stock_in_red() {
        let chart = svg("t", &[bar("naive", 100, 250), bar("redis-lua", 100, 100)]);
        assert_eq!(chart.matches(r#"class="bar""#).count(), 2);
        assert_eq!(chart.matches(OVERSOLD).count(), 2, "legend + naive only");
        assert!(chart.contains(
            r#"data-strategy="naive" data-initial="100" data-kept="250" data-given-back="0" data-oversold="150""#
        ));
        assert!(chart.contains("+150 oversold"));
    }

    /// With holds, 33 holds made on 30 units, 20 given back and sold
    /// again, nothing kept past the stock: no red but the legend's, and
    /// the numbers say what is kept and what went back.
    #[test]
    fn holds_given_back_are_not_drawn_as_sales_past_the_stock() {
        let held = Bar {
            given_back: Some(20),
            ..bar("redis-lua", 30, 13)
        };
        let chart = svg("t", std::slice::from_ref(&held));
        assert_eq!(chart.matches(OVERSOLD).count(), 1, "the legend only");
        assert!(chart.contains("13/30 kept · 20 given back"), "{chart}");
        assert!(svg_narrow("t", &[held]).contains("given back"));
    }

    /// The numbers of an oversold bar ran past the right edge (`… · p99
    /// 1`), and a long label would run into the bars: both are measured,
    /// at a character width no glyph of the font exceeds.
    #[test]
    fn the_chart_is_as_wide_as_its_longest_texts() {
        let attr = |svg: &str, name: &str| -> f64 {
            let at = svg.find(&format!(" {name}=\"")).expect(name) + name.len() + 3;
            svg[at..at + svg[at..].find('"').unwrap()].parse().unwrap()
        };
        let long = "zookeeper:semaphore-mutex (a label of forty chars)";
        let mut wide = bar(long, 100, 100_000);
        wide.rps = Some(123_456.0);
        wide.p99_ms = Some(123_456.0);
        let chart = svg("t", &[wide.clone(), bar("naive", 100, 250)]);
        let row = &chart[chart.find("<g class").unwrap()..];
        let bars_at = attr(&row[row.find("<rect").unwrap()..], "x");
        assert!(bars_at >= 8.0 + CHAR_W * long.len() as f64, "{bars_at}");
        let numbers = describe(&wide).chars().count() as f64;
        assert!(attr(&chart, "width") >= bars_at + BARS_W + 12.0 + CHAR_W * numbers);
        // Short texts keep the usual size.
        assert_eq!(attr(&svg("t", &[bar("naive", 1, 1)]), "width"), WIDTH);
    }

    /// The phone's chart wraps every text to its width, long words too.
    #[test]
    fn the_narrow_chart_wraps_every_text_to_its_width() {
        let chars = ((NARROW_W - 16.0) / NARROW_CHAR_W).floor() as usize;
        let long = "repeatable-read: db-transaction (store=postgres lock+store and more words)";
        let chart = svg_narrow("t", &[bar(long, 100, 123_456), bar("naive", 1, 1)]);
        assert_eq!(chart.matches(r#"class="bar-narrow""#).count(), 2);
        for text in chart.split("<text").skip(1) {
            let body = &text[text.find('>').unwrap() + 1..text.find("</text>").unwrap()];
            assert!(body.chars().count() <= chars, "{body:?}");
        }
        assert_eq!(wrap("aaaaa bb", 3), ["aaa", "aa", "bb"]);
        assert_eq!(wrap("", 3), [""]);
    }

    #[test]
    fn labels_are_escaped() {
        let chart = svg("<t>", &[bar("a<b>&\"", 1, 1)]);
        assert!(!chart.contains("<b>"));
        assert!(chart.contains("a&lt;b&gt;&amp;&quot;"));
    }
}
