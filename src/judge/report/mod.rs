//! `seckill report`: the comparison as something to look at — one
//! self-contained HTML file (inline SVG chart and the numbers, no external
//! assets) and, optionally, the chart alone as an SVG for the README.
//!
//! Input is a race's `--json` output (plain or scenario rows) or a live
//! gateway's `/report`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use serde::Deserialize;

use crate::instance::chart;
use crate::instance::chart::{Bar, Verdict, escape};
use crate::orders::ledger::Ledger;

/// `seckill report`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ReportArgs {
    /// A `seckill race --json` file (plain or `--scenario` rows) or a saved
    /// `GET /report`.
    #[arg(long, conflicts_with = "url", required_unless_present = "url")]
    pub input: Option<PathBuf>,
    /// A running gateway whose `/report` is charted instead.
    #[arg(long)]
    pub url: Option<String>,
    /// The HTML file to write.
    #[arg(long, default_value = "report.html")]
    pub out: PathBuf,
    /// Also write the chart alone as SVG (e.g. for a README).
    #[arg(long)]
    pub svg: Option<PathBuf>,
    /// The chart's title.
    #[arg(long, default_value = "seckill: sold vs stock per strategy")]
    pub title: String,
}

/// Runs `seckill report`.
pub async fn run(args: ReportArgs) -> anyhow::Result<()> {
    let text = match (&args.input, &args.url) {
        (Some(path), _) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        (None, Some(url)) => {
            let url = format!("{}/report", url.trim_end_matches('/'));
            reqwest::Client::builder()
                .no_proxy()
                .build()?
                .get(&url)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .with_context(|| format!("GET {url}"))?
                .text()
                .await?
        }
        (None, None) => anyhow::bail!("--input or --url is required"),
    };
    let bars = bars_from_json(&text)?;
    write(&args.out, args.svg.as_deref(), &args.title, &bars)?;
    eprintln!("wrote {} ({} rows)", args.out.display(), bars.len());
    Ok(())
}

/// Writes the HTML page (and the SVG alone when asked).
pub fn write(
    html_path: &Path,
    svg_path: Option<&Path>,
    title: &str,
    bars: &[Bar],
) -> anyhow::Result<()> {
    std::fs::write(html_path, html(title, bars))
        .with_context(|| format!("writing {}", html_path.display()))?;
    if let Some(path) = svg_path {
        std::fs::write(path, chart::svg(title, bars))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Reads race rows, scenario rows or ledgers, whichever the JSON holds.
pub fn bars_from_json(text: &str) -> anyhow::Result<Vec<Bar>> {
    let items: Vec<Value> = serde_json::from_str(text).context("expected a JSON array")?;
    items
        .into_iter()
        .map(|item| {
            Ok(if item.get("epoch").is_some() {
                Bar::from_ledger(&serde_json::from_value::<Ledger>(item)?)
            } else {
                serde_json::from_value::<RaceLine>(item)?.into()
            })
        })
        .collect()
}

/// What the report reads of a `seckill race --json` row (plain or
/// scenario): its own view of the race's output, so the report depends on
/// the JSON, not on the race's types.
#[derive(Debug, Deserialize)]
struct RaceLine {
    strategy: String,
    initial: i64,
    sold: i64,
    /// Absent from a file written before it was: then every order kept.
    kept: Option<i64>,
    /// With holds.
    life: Option<LifeLine>,
    oversold: i64,
    rps: f64,
    p99_ms: f64,
    /// Present on scenario rows only, as are the three below.
    scenario: Option<String>,
    #[serde(default)]
    variant: String,
    #[serde(default)]
    expected: String,
    #[serde(default)]
    met: bool,
}

/// What the chart reads of a race's order life.
#[derive(Debug, Deserialize)]
struct LifeLine {
    returned: i64,
}

impl From<RaceLine> for Bar {
    fn from(line: RaceLine) -> Self {
        let (label, verdict) = match &line.scenario {
            None => (line.strategy.clone(), None),
            Some(scenario) => {
                let mut label = format!("{scenario}: {}", line.strategy);
                if !line.variant.is_empty() {
                    label = format!("{label} ({})", line.variant);
                }
                let verdict = Verdict {
                    scenario: scenario.clone(),
                    expected: line.expected,
                    met: line.met,
                };
                (label, Some(verdict))
            }
        };
        Bar {
            label,
            strategy: line.strategy,
            initial: line.initial,
            kept: line.kept.unwrap_or(line.sold),
            given_back: line.life.map(|life| life.returned),
            oversold: line.oversold,
            rps: Some(line.rps),
            p99_ms: Some(line.p99_ms),
            verdict,
        }
    }
}

/// The page: title, chart, and a table with every number and verdict; a
/// scenario's rows under its claim, what the articles say happens.
pub fn html(title: &str, bars: &[Bar]) -> String {
    let mut rows = String::new();
    let mut scenario = None;
    for bar in bars {
        if let Some(verdict) = &bar.verdict
            && scenario != Some(&verdict.scenario)
        {
            scenario = Some(&verdict.scenario);
            let claim =
                crate::model::info::Scenario::named(&verdict.scenario).map_or("", |s| s.claim());
            rows.push_str(&format!(
                "<tr class=\"claim\"><td colspan=\"7\"><b>{}</b>: {}</td></tr>\n",
                escape(&verdict.scenario),
                escape(claim)
            ));
        }
        let verdict = bar.verdict.as_ref().map_or(String::new(), |v| {
            format!(
                "<td class=\"{}\">{} {}</td>",
                if v.met { "met" } else { "missed" },
                v.mark(),
                escape(&v.expected)
            )
        });
        let number = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.0}"));
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td>{verdict}</tr>\n",
            escape(&bar.label),
            bar.initial,
            match bar.given_back {
                None => bar.kept.to_string(),
                Some(back) => format!("{} ({back} given back)", bar.kept),
            },
            if bar.oversold > 0 { "missed" } else { "" },
            bar.oversold,
            number(bar.rps),
            number(bar.p99_ms),
        ));
    }
    let verdict_head = if bars.iter().any(|b| b.verdict.is_some()) {
        "<th>expected</th>"
    } else {
        ""
    };
    // On a phone the wide chart gives way to the narrow one, and the
    // table's cells wrap instead of running past the screen.
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{t}</title>\
         <style>body{{font-family:sans-serif;margin:2em;color:#111}}table{{border-collapse:collapse;margin-top:1em}}\
         td,th{{border:1px solid #d1d5db;padding:4px 8px;text-align:right;overflow-wrap:anywhere}}td:first-child,th:first-child{{text-align:left}}\
         .claim td{{text-align:left;background:#f3f4f6}}.met{{color:{sold}}}.missed{{color:{over};font-weight:bold}}.narrow{{display:none}}.wide svg{{max-width:100%;height:auto}}\
         @media (max-width:700px){{body{{margin:1em}}.wide{{display:none}}.narrow{{display:block}}\
         table{{width:100%;table-layout:fixed}}td,th{{padding:2px 3px;font-size:12px}}}}</style></head>\n<body>\n\
         <div class=\"wide\">{svg}</div>\n<div class=\"narrow\">{narrow}</div>\n\
         <table><tr><th>race</th><th>initial</th><th>kept</th><th>oversold</th><th>rps</th><th>p99 ms</th>{verdict_head}</tr>\n{rows}</table>\n\
         </body></html>\n",
        t = escape(title),
        svg = chart::svg(title, bars),
        narrow = chart::svg_narrow(title, bars),
        sold = chart::SOLD,
        over = chart::OVERSOLD,
    )
}
