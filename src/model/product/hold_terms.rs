//! An order's life after the sale, as far as a product's settings decide
//! it: how long a hold waits for its payment, how an overdue hold's unit
//! goes back on sale ([`Giveback`]), and when a hold is due — read off the
//! order id itself.
//!
//! Order ids are UUID v7: their first 48 bits are the millisecond the
//! instance made the order. So a hold's due time needs no column and no
//! extra write on the buy path (`pay_by = made + pay_within_ms`), and
//! "every hold due by now" is one range of the primary key's order:
//! `order_id < overdue_below(now, pay_within_ms)`.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// How an overdue (or cancelled) hold's unit goes back on sale: the
/// give-back mechanisms the catalogue compares, each with what it loses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum Giveback {
    /// The scan-and-return job people copy: select the overdue holds, put
    /// their units back, then mark them expired — no state check at
    /// either step, and a payment needs only the hold to be unmarked.
    /// Oversells when a payment lands between the put-back and the mark;
    /// sells a unit twice when the job dies between the two.
    NaiveCron,
    /// A compare-and-set state machine: held→paid before the due time,
    /// held→expired after it, and only the transition that won moves
    /// stock; every reaper pass first puts back (once, by a marker in the
    /// stock's own atomic step) each expired hold whose unit is not back,
    /// so a reaper or a cancel cut off between its expiry and its put-back
    /// strands nothing for longer than a pass. Every reaper selects the
    /// same overdue holds and the compare-and-set picks one winner each.
    StateMachine,
    /// The state machine fed by a delay queue: overdue holds claimed with
    /// `FOR UPDATE SKIP LOCKED`, so several reapers take different holds
    /// instead of racing for the same ones.
    #[default]
    DelayQueue,
}

impl Giveback {
    /// Every mechanism, the default last.
    pub const ALL: [Self; 3] = [Self::NaiveCron, Self::StateMachine, Self::DelayQueue];

    /// The mechanism's name in a reset body and a race label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NaiveCron => "naive-cron",
            Self::StateMachine => "state-machine",
            Self::DelayQueue => "delay-queue",
        }
    }

    /// Whether a payment must beat the due time (the state machine's
    /// rule); the naive job's payment takes any hold not yet marked.
    pub fn checks_due(self) -> bool {
        self != Self::NaiveCron
    }
}

/// The millisecond (since the Unix epoch) a v7 order id was made; `None`
/// for any other kind of id.
pub fn made_at_ms(order_id: Uuid) -> Option<u64> {
    if order_id.get_version_num() != 7 {
        return None;
    }
    let bytes = order_id.as_bytes();
    Some(
        bytes[..6]
            .iter()
            .fold(0u64, |ms, b| ms << 8 | u64::from(*b)),
    )
}

/// When a hold made as `order_id` stops taking payment: from this
/// millisecond on it is overdue.
pub fn pay_by_ms(order_id: Uuid, pay_within_ms: u64) -> Option<u64> {
    made_at_ms(order_id).map(|made| made.saturating_add(pay_within_ms))
}

/// The smallest order id that is not overdue at `now_ms`: every hold
/// below it is due (`made + pay_within <= now`), every hold at or above it
/// still takes payment. Compared as the primary key sorts (PostgreSQL's
/// `uuid`, MySQL's 16 bytes), which for v7 ids is the order they were made.
pub fn overdue_below(now_ms: u64, pay_within_ms: u64) -> Uuid {
    let first_payable = now_ms.saturating_sub(pay_within_ms).saturating_add(1);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&first_payable.to_be_bytes()[2..]);
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_is_due_from_its_pay_by_millisecond_on() {
        let order = Uuid::now_v7();
        let made = made_at_ms(order).expect("a v7 id");
        let within = 1_500;
        assert_eq!(pay_by_ms(order, within), Some(made + within));
        let payable = |now| order >= overdue_below(now, within);
        assert!(payable(made), "just made");
        assert!(payable(made + within - 1), "the last payable millisecond");
        assert!(!payable(made + within), "due at pay_by");
        assert!(!payable(made + 10 * within));
        assert_eq!(made_at_ms(Uuid::new_v4()), None);
    }

    #[test]
    fn names_round_trip_through_json() {
        for giveback in Giveback::ALL {
            let json = serde_json::to_value(giveback).expect("serializes");
            assert_eq!(json, serde_json::json!(giveback.as_str()));
        }
        assert_eq!(Giveback::default(), Giveback::DelayQueue);
    }
}
