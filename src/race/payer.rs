//! A race's order life: the payer model a race's holders follow
//! ([`Payer`]: pay, cancel or walk away, after a delay), and the numbers
//! a row with holds adds ([`LifeOutcome`]).

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::attempt::Attempt;
use crate::judge::check::history::{Completion, Op};
use crate::lab::client::Gateway;
use crate::model::product::hold_terms::{Giveback, pay_by_ms};
use crate::model::product::now_ms;
use crate::orders::ledger::Ledger;

/// What a race's holders do with their hold, each drawn at random: pay
/// (`pay_ratio`), cancel (`cancel_ratio`), or walk away (the rest, whose
/// buyers then watch their hold go back). A payer or canceller acts after
/// a delay drawn uniformly from `delay`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Payer {
    /// Share of holders who pay, in 0..=1.
    pub pay_ratio: f64,
    /// Share of holders who cancel, in 0..=1 (with `pay_ratio`, at most 1).
    pub cancel_ratio: f64,
    /// The delay before paying or cancelling.
    pub delay: DelayMs,
}

/// A delay drawn uniformly between two bounds, in ms: `MIN..MAX` on the
/// command line, or one number for a fixed delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayMs {
    /// The shortest.
    pub least: u64,
    /// The longest.
    pub most: u64,
}

impl DelayMs {
    /// One draw.
    fn draw(self) -> Duration {
        Duration::from_millis(rand::random_range(self.least..=self.most))
    }
}

impl std::str::FromStr for DelayMs {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let number = |part: &str| {
            part.trim()
                .parse::<u64>()
                .map_err(|_| format!("{text:?}: not a delay in ms (e.g. 100..2000, or 500)"))
        };
        let (least, most) = match text.split_once("..") {
            Some((least, most)) => (number(least)?, number(most)?),
            None => (number(text)?, number(text)?),
        };
        match least <= most {
            true => Ok(Self { least, most }),
            false => Err(format!("{text:?}: the shortest delay comes first")),
        }
    }
}

/// How long an abandoned hold's buyer looks for its give-back after the
/// due time before calling it unknown.
const GIVEBACK_LIMIT: Duration = Duration::from_secs(10);

impl Payer {
    /// What the holder of `hold` (its order and buyer) does with it, on a
    /// product whose holds last `pay_within_ms`: its steps, to become
    /// the race's history.
    pub async fn follow(
        self,
        target: Gateway,
        (order, buyer): (Uuid, String),
        pay_within_ms: u64,
    ) -> Vec<Attempt> {
        let roll: f64 = rand::random();
        if roll < self.pay_ratio + self.cancel_ratio {
            tokio::time::sleep(self.delay.draw()).await;
            return match roll < self.pay_ratio {
                true => vec![Attempt::pay(&target, order, &buyer).await],
                false => vec![Attempt::cancel(&target, order, &buyer).await],
            };
        }
        // Walked away: the buyer looks from the due time on.
        let due_ms = pay_by_ms(order, pay_within_ms).unwrap_or_else(now_ms);
        let due = Instant::now() + Duration::from_millis(due_ms.saturating_sub(now_ms()));
        vec![Attempt::expiry(&target, order, &buyer, due, GIVEBACK_LIMIT).await]
    }
}

/// What a row of a product with holds adds to the race's numbers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct LifeOutcome {
    /// The give-back mechanism.
    pub giveback: String,
    /// Orders holding their unit at the end.
    pub held: i64,
    /// Orders paid.
    pub paid: i64,
    /// Holds cancelled or overdue, never paid.
    pub expired: i64,
    /// Units put back on sale.
    pub returned: i64,
    /// Units neither on sale, held nor paid.
    pub stranded: i64,
    /// Paid orders whose unit was put back all the same.
    pub paid_and_returned: i64,
    /// Payments answered 200.
    pub pays_ok: u64,
    /// Payments answered 409 `expired`.
    pub pays_expired: u64,
    /// Cancels answered 200.
    #[serde(default)]
    pub cancels_ok: u64,
    /// Abandoned holds their buyers saw given back.
    #[serde(default)]
    pub giveback_seen: u64,
    /// Abandoned holds their buyers did not see given back within 10 s
    /// of the due time.
    #[serde(default)]
    pub giveback_unseen: u64,
    /// The longest a buyer saw its abandoned hold wait past its due time
    /// (ms, to within the 100 ms they look every).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub giveback_max_ms: Option<u64>,
    /// Reconciliation's `counter - truth` after the race: above 0, a unit
    /// was given back twice.
    #[serde(default)]
    pub drift: i64,
    /// Reconciliation's count of expired holds whose unit is not back on
    /// sale after the race (stranded by a reaper that died, or still on
    /// their way back).
    #[serde(default)]
    pub owed: i64,
    /// `abandoned-carts`: ms from the first buy until the last unit was
    /// paid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_paid_ms: Option<u64>,
}

impl LifeOutcome {
    /// The ledger's order-life columns under `giveback`, and what the
    /// buyers were told of their orders' later steps in `attempts`.
    pub fn of(ledger: &Ledger, giveback: Giveback, attempts: &[Attempt]) -> Self {
        let mut life = Self {
            giveback: giveback.as_str().to_owned(),
            held: ledger.held,
            paid: ledger.paid,
            expired: ledger.expired,
            returned: ledger.returned,
            stranded: ledger.stranded,
            paid_and_returned: ledger.paid_and_returned,
            ..Self::default()
        };
        for attempt in attempts {
            let ok = attempt.answer.status == 200;
            match attempt.op {
                Op::Buy | Op::Restock | Op::Pause | Op::Resume | Op::Close => {}
                Op::Pay if ok => life.pays_ok += 1,
                Op::Pay => {
                    let expired = attempt.answer.code.as_deref() == Some("expired");
                    life.pays_expired += u64::from(expired);
                }
                Op::Cancel => life.cancels_ok += u64::from(ok),
                Op::Expire if completed(attempt) => {
                    life.giveback_seen += 1;
                    let waited = attempt.took.as_millis() as u64;
                    life.giveback_max_ms = life.giveback_max_ms.max(Some(waited));
                }
                Op::Expire => life.giveback_unseen += 1,
            }
        }
        life
    }
}

/// Whether an attempt completed `ok`.
fn completed(attempt: &Attempt) -> bool {
    let answer = &attempt.answer;
    Completion::of(answer.status, answer.code.as_deref()) == Completion::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_read_as_a_range_or_one_number() {
        let read = |text: &str| text.parse::<DelayMs>();
        assert_eq!(
            read("100..2000"),
            Ok(DelayMs {
                least: 100,
                most: 2000
            })
        );
        assert_eq!(
            read("500"),
            Ok(DelayMs {
                least: 500,
                most: 500
            })
        );
        assert!(read("2000..100").is_err());
        assert!(read("soon").is_err());
    }
}
