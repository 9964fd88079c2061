//! The window rules, for every strategy (the window is judged before any
//! strategy runs): no buy sent after a pause answered 200 is sold unless
//! a resume may have come first (`sold_while_paused`), and none sent
//! after a close answered 200 is sold at all (`sold_after_close`).
//!
//! A pause answers once no instance admits under the old window, so a buy
//! sent after its answer is refused; one sent before may still sell. A
//! resume counts from its start (the earliest it can have taken effect)
//! if it was not refused, and only one that did not end before the pause
//! began: one entirely before the pause cannot have undone it.

use super::Violations;
use super::history::{Completion, Event, Op};

/// Counts the buys answered 200 that the history's pauses and closes
/// forbid. One pass to find the operator's few operations, then one over
/// the buys, each against those few: a bench's history holds hundreds of
/// thousands of buys and no pause at all.
pub(super) fn window_rules(events: &[Event], violations: &mut Violations) {
    let of = |op: Op, keep: fn(Completion) -> bool| -> Vec<&Event> {
        events
            .iter()
            .filter(|e| e.op == op && keep(e.completion))
            .collect()
    };
    let pauses = of(Op::Pause, |c| c == Completion::Ok);
    let resumes = of(Op::Resume, |c| c != Completion::Fail);
    // A buy sent after any close answered is sent after the first one.
    let first_close = of(Op::Close, |c| c == Completion::Ok)
        .iter()
        .map(|close| close.end_us)
        .min();
    let (mut while_paused, mut after_close) = (0, 0);
    for buy in events
        .iter()
        .filter(|e| e.op == Op::Buy && e.completion == Completion::Ok)
    {
        let paused = pauses.iter().any(|pause| {
            pause.end_us < buy.start_us
                && !resumes
                    .iter()
                    .any(|r| r.start_us < buy.end_us && r.end_us > pause.start_us)
        });
        while_paused += u64::from(paused);
        after_close += u64::from(first_close.is_some_and(|end| end < buy.start_us));
    }
    violations.count("sold_while_paused", while_paused);
    violations.count("sold_after_close", after_close);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(op: Op, start_us: u64, end_us: u64, completion: Completion) -> Event {
        Event {
            op,
            buyer: "b".into(),
            start_us,
            end_us,
            completion,
            status: if completion == Completion::Ok {
                200
            } else {
                403
            },
            code: None,
            order_id: None,
            served_by: None,
            stock_left: None,
            pay_by_ms: None,
            units: None,
        }
    }

    fn count(events: &[Event]) -> Vec<(String, u64)> {
        let mut violations = Violations::default();
        window_rules(events, &mut violations);
        violations.0.into_iter().collect()
    }

    #[test]
    fn a_sale_after_a_pause_counts_unless_a_resume_may_have_come_first() {
        let ok = Completion::Ok;
        let pause = event(Op::Pause, 100, 200, ok);
        let during = event(Op::Buy, 300, 310, ok);
        let overlapping = event(Op::Buy, 150, 250, ok);
        assert_eq!(
            count(&[pause.clone(), during.clone(), overlapping.clone()]),
            vec![("sold_while_paused".to_owned(), 1)]
        );
        // A resume sent before the sale ended may have let it through.
        let resume = event(Op::Resume, 305, 400, ok);
        assert!(count(&[pause.clone(), during.clone(), resume]).is_empty());
        // One refused, or entirely before the pause, did not.
        let refused = event(Op::Resume, 305, 400, Completion::Fail);
        let before = event(Op::Resume, 10, 90, ok);
        assert_eq!(
            count(&[pause, during, refused, before]).len(),
            1,
            "a resume that could not undo the pause"
        );
    }

    #[test]
    fn nothing_sells_after_a_close_and_a_refused_close_binds_nothing() {
        let close = event(Op::Close, 100, 200, Completion::Ok);
        let resume = event(Op::Resume, 250, 260, Completion::Ok);
        let after = event(Op::Buy, 300, 310, Completion::Ok);
        assert_eq!(
            count(&[close, resume, after.clone()]),
            vec![("sold_after_close".to_owned(), 1)]
        );
        let unknown = event(Op::Close, 100, 200, Completion::Info);
        assert!(count(&[unknown, after]).is_empty());
    }
}
