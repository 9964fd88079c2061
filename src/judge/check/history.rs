//! The history file: what a load driver saw, one JSON object per line, in
//! the shape Jepsen gives a history — each request with its start and end
//! time and how it completed: `ok` (200), `fail` (the answer says nothing
//! was sold) or `info` (nobody knows: the outcome is unknown).
//!
//! A race writes one `race` line naming the product and its reset, then
//! one line per request. Defined here, next to the checker that reads it,
//! so the checker owns its input and the driver only writes it.

use std::io::{BufRead, Write};
use std::path::Path;

use crate::model::product::StoreKind;
use crate::model::product::operation::WindowAction;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// How a request completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Completion {
    /// 200: sold, with an order id.
    Ok,
    /// A definite refusal: nothing was sold.
    Fail,
    /// Unknown: the write may or may not have happened (503
    /// `outcome_unknown`, a gateway 502/504, no answer at all).
    Info,
}

impl Completion {
    /// The completion a buy's status and error code stand for. Only a
    /// definite answer is a `fail`; whatever is not known is `info`.
    pub fn of(status: u16, code: Option<&str>) -> Self {
        match (status, code) {
            (200, _) => Self::Ok,
            (_, Some("outcome_unknown")) | (0 | 502 | 504, _) => Self::Info,
            _ => Self::Fail,
        }
    }
}

/// What a request did: a buy, or a step of the order's life after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `POST /stock/{id}/buy` (left out of the line: a history without
    /// holds has nothing else).
    #[default]
    Buy,
    /// `POST /orders/{id}/pay`.
    Pay,
    /// `POST /orders/{id}/cancel`.
    Cancel,
    /// The service's give-back of an abandoned hold, as its buyer saw it:
    /// from the hold's due time (`start_us`) until the buyer read it
    /// `expired` (`ok`), or gave up looking (`info`).
    Expire,
    /// `POST /admin/products/{id}/restock`: units added to the live sale
    /// (`units`), on sale from its start at the earliest.
    Restock,
    /// `POST /admin/products/{id}/window`, `pause`: from its 200 on, no
    /// buy sent is sold until a resume.
    Pause,
    /// The same, `resume`: buys sell again, from its start at the earliest.
    Resume,
    /// The same, `close`: from its 200 on, no buy sent is sold.
    Close,
}

impl Op {
    /// The history line of a window `action`.
    pub fn of_window(action: WindowAction) -> Self {
        match action {
            WindowAction::Pause => Self::Pause,
            WindowAction::Resume => Self::Resume,
            WindowAction::Close => Self::Close,
        }
    }
}

impl Op {
    /// Whether it is a buy (then the line leaves it out).
    pub fn is_buy(&self) -> bool {
        *self == Self::Buy
    }
}

/// The race a run of lines belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Race {
    /// Product raced.
    pub product: i64,
    /// Its reset generation: the orders checked are this epoch's.
    pub epoch: i64,
    /// Strategy selling it.
    pub strategy: String,
    /// Whether the strategy claims never to oversell (then sold ≤ initial,
    /// no shared unit and the per-buyer limit are checked too).
    pub safe: bool,
    /// Stock at the reset (the race's `restock` lines add to it).
    pub initial: i64,
    /// Units one buyer may hold (0: no limit).
    pub per_user_limit: u32,
    /// The product's `pay_within_ms`: with it, an order keeps its unit
    /// only while held or once paid, and units go round again.
    #[serde(default)]
    pub pay_within_ms: u64,
    /// Where the race's orders are: `mysql` for a product stored there,
    /// PostgreSQL otherwise (absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orders_in: Option<StoreKind>,
    /// When the race began, in ms since the Unix epoch: the instant the
    /// events' times count from, so a hold's due time (from its order id)
    /// can be put on the same clock.
    #[serde(default)]
    pub began_ms: u64,
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// What it did.
    #[serde(default, skip_serializing_if = "Op::is_buy")]
    pub op: Op,
    /// The buyer (Jepsen's process).
    pub buyer: String,
    /// Sent, in µs since the race began.
    pub start_us: u64,
    /// Answered (or given up on), in µs since the race began.
    pub end_us: u64,
    /// How it completed.
    #[serde(rename = "type")]
    pub completion: Completion,
    /// HTTP status; 0 when no answer came.
    pub status: u16,
    /// The error code of a non-200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The order id of a 200, or of the sale an `outcome_unknown` was
    /// about; for the order's later steps, the order they were on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<Uuid>,
    /// The instance that answered a 200 (a buy, a pay, a cancel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_by: Option<String>,
    /// The stock left after a 200's sale, where the strategy tells it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_left: Option<i64>,
    /// A hold's due time (ms since the Unix epoch) as its 200 said: an
    /// outside checker need not derive it from the order id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay_by_ms: Option<u64>,
    /// A restock's units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<i64>,
}

/// A line of the file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum Line {
    Race { race: Race },
    Event(Event),
}

/// One race's part of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaceHistory {
    /// Which race.
    pub race: Race,
    /// Its requests, in the order written.
    pub events: Vec<Event>,
}

/// Appends one race to `path` (created if missing): a file may collect
/// every race of a run.
pub fn append(path: &Path, history: &RaceHistory) -> anyhow::Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let header = Line::Race {
        race: history.race.clone(),
    };
    serde_json::to_writer(&mut out, &header)?;
    out.write_all(b"\n")?;
    for event in &history.events {
        serde_json::to_writer(&mut out, event)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// Reads every race of a history file.
pub fn read(path: &Path) -> anyhow::Result<Vec<RaceHistory>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut races: Vec<RaceHistory> = Vec::new();
    for (number, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: Line = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a history line", path.display(), number + 1))?;
        match parsed {
            Line::Race { race } => races.push(RaceHistory {
                race,
                events: Vec::new(),
            }),
            Line::Event(event) => races
                .last_mut()
                .with_context(|| {
                    format!(
                        "{}:{}: a request before any race line",
                        path.display(),
                        number + 1
                    )
                })?
                .events
                .push(event),
        }
    }
    Ok(races)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_follow_what_the_answer_knows() {
        assert_eq!(Completion::of(200, None), Completion::Ok);
        assert_eq!(Completion::of(409, Some("sold_out")), Completion::Fail);
        assert_eq!(Completion::of(503, Some("busy")), Completion::Fail);
        assert_eq!(Completion::of(503, Some("unavailable")), Completion::Fail);
        assert_eq!(
            Completion::of(503, Some("outcome_unknown")),
            Completion::Info
        );
        assert_eq!(Completion::of(502, None), Completion::Info);
        assert_eq!(Completion::of(504, Some("whatever")), Completion::Info);
        assert_eq!(Completion::of(0, Some("transport")), Completion::Info);
    }

    #[test]
    fn a_history_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.jsonl");
        let race = |product| RaceHistory {
            race: Race {
                product,
                epoch: 2,
                strategy: "redis-lua".into(),
                safe: true,
                initial: 1,
                per_user_limit: 0,
                pay_within_ms: 0,
                orders_in: None,
                began_ms: 0,
            },
            events: vec![Event {
                op: Op::Buy,
                buyer: "b-0".into(),
                start_us: 1,
                end_us: 5,
                completion: Completion::Ok,
                status: 200,
                code: None,
                order_id: Some(Uuid::now_v7()),
                served_by: Some("instance-a".into()),
                stock_left: Some(0),
                pay_by_ms: Some(1_700_000_000_000),
                units: None,
            }],
        };
        append(&path, &race(1)).unwrap();
        append(&path, &race(2)).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].race.product, 2);
        assert_eq!(back[0].events.len(), 1);
    }
}
