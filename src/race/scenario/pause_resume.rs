//! `pause-resume`: a live sale paused, resumed and closed early through
//! the gateway while buyers race, without a reset. Buyers arrive
//! [`PACE_MS`] apart; [`STRETCH`] after the first, the operator pauses,
//! [`STRETCH`] after the pause answered resumes, as long after that
//! closes, and buyers keep coming for [`STRETCH`] after the close
//! answered (each stretch counted from an answer, so a slow answer
//! shortens none). One lock-free Redis strategy, the database's atomic
//! update on both stores, segments and a row lock, each on its own
//! product, all at once; and `redis-lua` with holds, each paid only after
//! the close.
//!
//! Expected, from the mechanism: the window is judged before any strategy
//! runs, on the shared clock, on each instance's copy of the product; a
//! change answers only once every instance has forgotten its copy (or
//! their lifetime has passed). So a buy sent after the pause answered is
//! refused 403 `not_started` until the resume is sent, one sent after the
//! close answered is refused 410 `ended`; buys sell before the pause and
//! after the resume; every 200 is an order, none oversold; and each hold
//! made before the close is paid after it (a close ends buying, not
//! orders). The history check holds the first two as `sold_while_paused`
//! and `sold_after_close`.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Ctx, ScenarioRow, judge};
use crate::judge::check::history::Op;
use crate::lab::LabArgs;
use crate::lab::client::Gateway;
use crate::model::info::{Expect, Scenario};
use crate::model::product::operation::WindowAction;
use crate::model::product::{Settings, StoreKind};
use crate::race::driver::{Attempt, reset};

/// Units: more than the buyers, so the sale never sells out and every
/// refusal is the window's.
const STOCK: i64 = 1_000;
/// One buyer every this many ms.
const PACE_MS: u64 = 10;
/// Each stretch of the race: open, paused, resumed, closed.
const STRETCH: Duration = Duration::from_millis(600);
/// The holds' time to pay: long enough that every hold is still held
/// when it is paid after the race.
const PAY_WITHIN_MS: u64 = 30_000;

/// What the buyers of each stretch of the race were told, counted from
/// when each buy was sent against the operator's requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Phases {
    /// Sold before the pause was sent.
    pub sold_open: u64,
    /// Sent after the pause answered, before the resume was sent: told
    /// `not_started`.
    pub refused_paused: u64,
    /// Of those, sold (must be 0).
    pub sold_paused: u64,
    /// Sold after the resume answered, before the close was sent.
    pub sold_resumed: u64,
    /// Sent after the close answered: told `ended`.
    pub refused_closed: u64,
    /// Of those, sold (must be 0).
    pub sold_closed: u64,
    /// Holds paid after the close, of those made.
    pub paid_after_close: u64,
    /// Each operator request answered 200.
    pub operator_ok: bool,
    /// How long the pause, the resume and the close each took to answer,
    /// in ms: every instance told before the 200.
    pub operator_ms: Vec<u64>,
}

impl Phases {
    /// Whether the stretches show the window working: sales on both
    /// sides of the pause, refusals inside it and after the close, none
    /// sold there, and (with holds) every hold paid.
    fn met(&self, holds: Option<u64>) -> bool {
        self.operator_ok
            && self.sold_open > 0
            && self.sold_resumed > 0
            && self.refused_paused > 0
            && self.refused_closed > 0
            && self.sold_paused == 0
            && self.sold_closed == 0
            && holds.is_none_or(|made| self.paid_after_close == made)
    }
}

pub async fn run(ctx: &mut Ctx) -> anyhow::Result<Vec<ScenarioRow>> {
    ctx.with_lab(LabArgs::with_instances(2), async |ctx, lab| {
        let gateway = Gateway::new(&lab.info.gateway_url, &lab.info.admin_token, 64)?;
        let sellers = [
            ("redis-lua", StoreKind::Redis, 0),
            ("db-atomic", StoreKind::Postgres, 0),
            ("db-atomic", StoreKind::Mysql, 0),
            ("segmented", StoreKind::Redis, 0),
            ("db-pessimistic", StoreKind::Postgres, 0),
            ("redis-lua", StoreKind::Redis, PAY_WITHIN_MS),
        ];
        let mut products = Vec::new();
        for (strategy, store, pay_within_ms) in sellers {
            let product = ctx.product();
            let settings = Settings {
                store: Some(store),
                pay_within_ms,
                ..Settings::default()
            };
            reset(&gateway, product, strategy, STOCK, settings).await?;
            let holds = if pay_within_ms > 0 { "+holds" } else { "" };
            let variant = format!("{strategy}@{}{holds}", store.as_str());
            products.push((product, variant, pay_within_ms > 0));
        }
        let started = Instant::now();
        let races = products
            .iter()
            .map(|(product, _, holds)| sale(&gateway, *product, *holds));
        let raced = futures::future::join_all(races).await;
        let mut rows = Vec::new();
        for ((product, variant, holds), (attempts, phases)) in products.into_iter().zip(raced) {
            let row = ctx
                .scripted_row(&gateway, product, &attempts, started)
                .await?;
            let made = holds.then_some(row.client_ok as u64);
            let mut scenario = judge(row, Scenario::PauseResume, &variant, Expect::NoOversell);
            scenario.met &= phases.met(made);
            scenario.window = Some(phases);
            rows.push(scenario);
        }
        Ok(rows)
    })
    .await
}

/// One product's race: paced buyers with the operator's three requests
/// among them, then (with holds) every hold paid.
async fn sale(gateway: &Gateway, product: i64, holds: bool) -> (Vec<Attempt>, Phases) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let operator = async {
        let attempts = operate(gateway, product).await;
        tokio::time::sleep(STRETCH).await;
        let _ = stop.send(true);
        attempts
    };
    let (mut attempts, operator) = tokio::join!(buyers(gateway, product, stopped), operator);
    let mut phases = tally(&attempts, &operator);
    if holds {
        let held: Vec<_> = attempts
            .iter()
            .filter(|a| a.op == Op::Buy && a.answer.status == 200)
            .filter_map(|a| Some((a.answer.order_id?, a.buyer.clone())))
            .collect();
        for (order, buyer) in held {
            let paid = Attempt::pay(gateway, order, &buyer).await;
            phases.paid_after_close += u64::from(paid.answer.status == 200);
            attempts.push(paid);
        }
    }
    attempts.extend(operator);
    (attempts, phases)
}

/// A buyer every [`PACE_MS`], each in flight on its own, until `stop`.
async fn buyers(
    gateway: &Gateway,
    product: i64,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<Attempt> {
    let mut pace = tokio::time::interval(Duration::from_millis(PACE_MS));
    let mut buys = Vec::new();
    while !*stop.borrow() {
        pace.tick().await;
        let buyer = format!("pause-{product}-{}", buys.len());
        let gateway = gateway.clone();
        buys.push(tokio::spawn(async move {
            Attempt::make(&gateway, product, &buyer).await
        }));
    }
    let mut attempts = Vec::new();
    for buy in buys {
        attempts.push(buy.await.expect("a buyer panicked"));
    }
    attempts
}

/// The pause, the resume and the close, each a [`STRETCH`] after the
/// last answered.
async fn operate(gateway: &Gateway, product: i64) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    for action in [
        WindowAction::Pause,
        WindowAction::Resume,
        WindowAction::Close,
    ] {
        tokio::time::sleep(STRETCH).await;
        attempts.push(Attempt::window(gateway, product, action).await);
    }
    attempts
}

/// Each buy put in its stretch by when it was sent: after an operator
/// request answered, before the next was sent. A buy sent while one was
/// in flight may go either way and counts nowhere.
fn tally(buys: &[Attempt], operator: &[Attempt]) -> Phases {
    let mut phases = Phases {
        operator_ok: operator.iter().all(|a| a.answer.status == 200),
        operator_ms: operator.iter().map(|a| a.took.as_millis() as u64).collect(),
        ..Phases::default()
    };
    let [pause, resume, close] = operator else {
        return phases;
    };
    let answered = |a: &Attempt| a.sent + a.took;
    for buy in buys.iter().filter(|a| a.op == Op::Buy) {
        let sold = u64::from(buy.answer.status == 200);
        let code = buy.answer.code.as_deref();
        if buy.sent < pause.sent {
            phases.sold_open += sold;
        } else if buy.sent > answered(pause) && buy.sent < resume.sent {
            phases.refused_paused += u64::from(code == Some("not_started"));
            phases.sold_paused += sold;
        } else if buy.sent > answered(resume) && buy.sent < close.sent {
            phases.sold_resumed += sold;
        } else if buy.sent > answered(close) {
            phases.refused_closed += u64::from(code == Some("ended"));
            phases.sold_closed += sold;
        }
    }
    phases
}
