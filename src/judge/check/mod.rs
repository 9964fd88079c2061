//! `seckill check FILE`: an independent check of a race's history against
//! the orders the database holds (PostgreSQL's, or MySQL's for a product
//! stored there). Independent: it reads the history the
//! driver wrote and the `orders` table with its own query, and trusts
//! neither the service's ledger nor the driver's counts.
//!
//! Every race is held to:
//! - every `ok` has exactly one durable order, with its order id and its
//!   buyer (`ok_without_order`, `wrong_buyer`, `duplicate_ok`);
//! - every order is an `ok` or an `info` (`order_without_ok`: an order
//!   nobody was told about, or one whose buyer was told "nothing sold");
//! - no buyer has more orders than requests that sold or may have
//!   (`replayed`: a request sold twice, as a gateway replaying a POST on
//!   another instance would);
//! - no buy sent after a pause or a close answered is sold
//!   (`sold_while_paused`, `sold_after_close`; the `window` module);
//!
//! and a race of a safe strategy also to:
//! - sold ≤ initial (`oversold`);
//! - no two `ok`s claim the same unit (`duplicate_unit`, from the stock
//!   left each sale reports);
//! - no buyer above `per_user_limit` (`over_limit`).
//!
//! With `pay_within_ms` an order keeps its unit only while it is held or
//! once it is paid; an expired one gave it back, and the unit sells again.
//! The history then also holds the order's later steps (`pay`, `cancel`,
//! and `expire` as its buyer saw it), and every strategy is held to:
//! - every pay answered 200 is a paid order (`pay_ok_unpaid`), and every
//!   paid order had a pay that was answered 200 or not at all
//!   (`paid_without_pay`);
//! - no order its buyer was told is cancelled or expired is paid
//!   (`given_back_then_paid`);
//!
//! and a safe one to: paid + held ≤ initial *at every instant*
//! (`oversold`, the most above the stock at any moment: each order counted
//! from the answer of its buy, until the earliest moment its unit can have
//! gone back — its due time, from its order id, or the start of its
//! cancel), `over_limit` over the orders that keep a unit, no paid order
//! whose unit was given back (`paid_and_given_back`); a unit number may
//! come round again (no `duplicate_unit`). A unit given back twice shows
//! there as a unit sold once more than the stock (and in `seckill
//! reconcile` as a counter above its truth).

pub mod history;
mod window;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use sqlx::{MySqlPool, PgPool};
use uuid::Uuid;

use crate::backends::flags::Databases;
use crate::model::product::StoreKind;
use crate::model::product::hold_terms::made_at_ms;
use history::{Completion, Event, Op, RaceHistory};

/// The rules every strategy is held to, safe or not: a broken one means
/// the service lied to a buyer or lost an order. The others (`oversold`,
/// `duplicate_unit`, `over_limit`) are what an unsafe strategy, or a safe
/// one under a fault it does not survive, is expected to break.
pub const UNIVERSAL: &[&str] = &[
    "ok_without_order",
    "wrong_buyer",
    "duplicate_ok",
    "order_without_ok",
    "replayed",
    "pay_ok_unpaid",
    "paid_without_pay",
    "given_back_then_paid",
    "sold_while_paused",
    "sold_after_close",
];

/// Whether a row's violations break only the rules a strategy may break
/// when it oversells: every buyer was told the truth about their order.
pub fn truthful(violations: &BTreeMap<String, u64>) -> bool {
    violations
        .keys()
        .all(|name| !UNIVERSAL.contains(&name.as_str()))
}

/// `seckill check`'s flags.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The history file (`seckill race --history FILE` writes it).
    pub file: PathBuf,
    /// Where the orders are.
    #[command(flatten)]
    pub databases: Databases,
}

/// The databases a race's orders may be in.
#[derive(Clone)]
pub struct OrderDbs {
    /// PostgreSQL: every order but a MySQL-stored product's.
    pub pg: PgPool,
    /// MySQL, when there is one.
    pub mysql: Option<MySqlPool>,
}

impl OrderDbs {
    /// Pools that connect on first use (two connections each: the check
    /// runs one query per race).
    pub fn connect_lazy(database_url: &str, mysql_url: Option<&str>) -> anyhow::Result<Self> {
        let pg = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect_lazy(database_url)?;
        let mysql = match mysql_url.filter(|url| !url.is_empty()) {
            Some(url) => Some(
                sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(2)
                    .connect_lazy(url)?,
            ),
            None => None,
        };
        Ok(Self { pg, mysql })
    }

    /// The orders of `race` as the database holds them: order id, buyer,
    /// state and payment.
    async fn orders(&self, race: &history::Race) -> anyhow::Result<Vec<OrderRow>> {
        if race.orders_in == Some(StoreKind::Mysql) {
            let mysql = self.mysql.as_ref().context(
                "the race's orders are in MySQL: give its URL (--mysql-url, SECKILL_MYSQL_URL)",
            )?;
            return Ok(sqlx::query_as(
                "SELECT order_id, user_id, state, paid_at_ms FROM orders \
                 WHERE product_id = ? AND epoch = ?",
            )
            .bind(race.product)
            .bind(race.epoch)
            .fetch_all(mysql)
            .await?);
        }
        Ok(sqlx::query_as(
            "SELECT order_id, user_id, state, paid_at_ms FROM orders \
             WHERE product_id = $1 AND epoch = $2",
        )
        .bind(race.product)
        .bind(race.epoch)
        .fetch_all(&self.pg)
        .await?)
    }

    /// Closes the pools.
    pub async fn close(&self) {
        self.pg.close().await;
        if let Some(mysql) = &self.mysql {
            mysql.close().await;
        }
    }
}

/// What the check found in one race.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// No violation.
    pub history_ok: bool,
    /// Each violation found, by name, with its count (only non-zero ones).
    pub violations: BTreeMap<String, u64>,
    /// Requests whose outcome the buyer was not told (`info`).
    pub unknown: u64,
    /// Of those, how many did sell (their order is in the ledger).
    pub unknown_sold: u64,
    /// The most orders that kept a unit at one instant, less the units
    /// restocks may have added by then, for every race (a safe one's
    /// oversell is this past the reset's stock; an unsafe one's, such as a
    /// naive give-back's, is reported from it too).
    pub peak_kept: u64,
}

/// An order row as [`OrderDbs::orders`] reads it.
type OrderRow = (Uuid, String, Option<String>, Option<i64>);

/// One order as the table holds it.
#[derive(Clone)]
struct Order {
    order_id: Uuid,
    user_id: String,
    /// Its state column: `None` while it keeps its unit unpaid.
    state: Option<String>,
    /// Whether it was paid.
    paid: bool,
}

impl Order {
    /// Whether it keeps its unit: held, or paid.
    fn keeps(&self) -> bool {
        self.state.is_none() || self.paid
    }
}

/// Reads the race's orders from its database and holds the history to
/// them.
pub async fn check(dbs: &OrderDbs, race: &RaceHistory) -> anyhow::Result<Verdict> {
    let rows = dbs.orders(&race.race).await?;
    let orders = rows
        .into_iter()
        .map(|(order_id, user_id, state, paid_at_ms)| Order {
            order_id,
            user_id,
            state,
            paid: paid_at_ms.is_some(),
        })
        .collect::<Vec<_>>();
    Ok(judge(race, &orders))
}

/// Violations by name, each with its count (only non-zero ones kept).
#[derive(Default)]
struct Violations(BTreeMap<String, u64>);

impl Violations {
    fn count(&mut self, name: &str, n: u64) {
        if n > 0 {
            *self.0.entry(name.to_owned()).or_default() += n;
        }
    }
}

/// What a history's events say, gathered in one pass.
#[derive(Default)]
struct Seen<'a> {
    /// Order ids answered 200, with how many times.
    ok_ids: HashMap<Uuid, u64>,
    /// Units (the stock left after a sale) answered, with how many times.
    units: HashMap<i64, u64>,
    /// Order ids of unknown outcomes.
    unknown_ids: HashSet<Uuid>,
    /// Buyers with an unknown outcome (an answer that never came names no
    /// order).
    unknown_buyers: HashSet<&'a str>,
    /// Unknown outcomes.
    unknown: u64,
    /// Requests per buyer that sold or may have: the most orders each may
    /// hold.
    requests: HashMap<&'a str, u64>,
    /// When each order's buy was answered 200 (µs since the race began).
    bought_at: HashMap<Uuid, u64>,
    /// Each order's later steps, as its buyer saw them.
    steps: HashMap<Uuid, Vec<Step>>,
    /// The last answer's time: orders nobody saw made are counted from
    /// there.
    last_us: u64,
    /// Restocks that added or may have (µs since the race began they were
    /// sent, units): their units count as on sale from then.
    additions: Vec<(u64, i64)>,
}

/// A pay, cancel or expire on one order.
struct Step {
    op: Op,
    completion: Completion,
    start_us: u64,
}

impl<'a> Seen<'a> {
    /// Reads `events`, counting a 200 whose order is missing or another
    /// buyer's.
    fn of(events: &'a [Event], orders: &[Order], violations: &mut Violations) -> Self {
        let by_id: HashMap<Uuid, &Order> = orders.iter().map(|o| (o.order_id, o)).collect();
        let mut seen = Self::default();
        for event in events {
            seen.last_us = seen.last_us.max(event.end_us);
            if event.op == Op::Restock {
                if event.completion != Completion::Fail {
                    let units = event.units.unwrap_or(0).max(0);
                    seen.additions.push((event.start_us, units));
                }
                continue;
            }
            if event.op != Op::Buy {
                if let Some(order) = event.order_id {
                    seen.steps.entry(order).or_default().push(Step {
                        op: event.op,
                        completion: event.completion,
                        start_us: event.start_us,
                    });
                }
                continue;
            }
            if event.completion != Completion::Fail {
                *seen.requests.entry(event.buyer.as_str()).or_default() += 1;
            }
            match event.completion {
                Completion::Ok => {
                    let Some(id) = event.order_id else {
                        violations.count("ok_without_order", 1);
                        continue;
                    };
                    *seen.ok_ids.entry(id).or_default() += 1;
                    seen.bought_at.insert(id, event.end_us);
                    match by_id.get(&id) {
                        None => violations.count("ok_without_order", 1),
                        Some(order) if order.user_id != event.buyer => {
                            violations.count("wrong_buyer", 1);
                        }
                        Some(_) => {}
                    }
                    if let Some(left) = event.stock_left {
                        *seen.units.entry(left).or_default() += 1;
                    }
                }
                Completion::Info => {
                    seen.unknown += 1;
                    seen.unknown_buyers.insert(event.buyer.as_str());
                    if let Some(id) = event.order_id {
                        seen.unknown_ids.insert(id);
                    }
                }
                Completion::Fail => {}
            }
        }
        seen
    }

    /// `order`'s steps of kind `op`.
    fn steps(&self, order: Uuid, op: Op) -> impl Iterator<Item = &Step> {
        self.steps
            .get(&order)
            .into_iter()
            .flatten()
            .filter(move |step| step.op == op)
    }
}

/// The rules on the order's later steps, for every strategy: what a buyer
/// was told of a payment or a give-back is what the table holds.
fn life_rules(orders: &[Order], seen: &Seen, violations: &mut Violations) {
    let by_id: HashMap<Uuid, &Order> = orders.iter().map(|o| (o.order_id, o)).collect();
    for (id, steps) in &seen.steps {
        let order = by_id.get(id);
        let paid = order.is_some_and(|o| o.paid);
        let said = |op: Op| {
            steps
                .iter()
                .any(|s| s.op == op && s.completion == Completion::Ok)
        };
        if said(Op::Pay) && !paid {
            violations.count("pay_ok_unpaid", 1);
        }
        if (said(Op::Cancel) || said(Op::Expire)) && paid {
            violations.count("given_back_then_paid", 1);
        }
    }
    let unpaid_for = orders
        .iter()
        .filter(|o| o.paid)
        .filter(|o| {
            !seen
                .steps(o.order_id, Op::Pay)
                .any(|s| s.completion != Completion::Fail)
        })
        .count();
    violations.count("paid_without_pay", unpaid_for as u64);
}

/// The rules, on a history and the orders of its race.
fn judge(race: &RaceHistory, orders: &[Order]) -> Verdict {
    let mut violations = Violations::default();
    let seen = Seen::of(&race.events, orders, &mut violations);
    let duplicates = seen.ok_ids.values().map(|n| n.saturating_sub(1)).sum();
    violations.count("duplicate_ok", duplicates);

    let mut unknown_sold = 0;
    let mut per_buyer: HashMap<&str, u64> = HashMap::new();
    for order in orders {
        *per_buyer.entry(order.user_id.as_str()).or_default() += 1;
        if seen.ok_ids.contains_key(&order.order_id) {
            continue;
        }
        // An unknown outcome that did sell: named by its order id, or (an
        // answer that never came carries none) by its buyer.
        let buyer = order.user_id.as_str();
        if seen.unknown_ids.contains(&order.order_id) || seen.unknown_buyers.contains(buyer) {
            unknown_sold += 1;
        } else {
            violations.count("order_without_ok", 1);
        }
    }
    let replayed = per_buyer
        .iter()
        // A buyer told only "nothing sold" counts under `order_without_ok`
        // for its first order, not here too.
        .map(|(buyer, n)| n.saturating_sub(seen.requests.get(buyer).copied().unwrap_or(0).max(1)))
        .sum();
    violations.count("replayed", replayed);
    life_rules(orders, &seen, &mut violations);
    window::window_rules(&race.events, &mut violations);

    let info = &race.race;
    let peak_kept = peak_keeping(info, orders, &seen);
    if info.safe {
        safe_rules(info, orders, peak_kept, &seen, &mut violations);
    }
    Verdict {
        history_ok: violations.0.is_empty(),
        violations: violations.0,
        unknown: seen.unknown,
        unknown_sold,
        peak_kept,
    }
}

/// The rules of a strategy that claims never to oversell.
fn safe_rules(
    info: &history::Race,
    orders: &[Order],
    peak_kept: u64,
    seen: &Seen,
    violations: &mut Violations,
) {
    let holds = info.pay_within_ms > 0;
    let over = (peak_kept as i64 - info.initial).max(0) as u64;
    violations.count("oversold", over);
    if holds {
        let given_back = |o: &&Order| o.paid && o.state.as_deref() != Some("paid");
        violations.count(
            "paid_and_given_back",
            orders.iter().filter(given_back).count() as u64,
        );
    } else {
        // The stock passes each value once per run down between two
        // additions: a value told after more sales than that is shared.
        let runs = 1 + seen.additions.len() as u64;
        let shared = seen.units.values().map(|n| n.saturating_sub(runs)).sum();
        violations.count("duplicate_unit", shared);
    }
    if info.per_user_limit > 0 {
        let limit = u64::from(info.per_user_limit);
        let mut per_buyer: HashMap<&str, u64> = HashMap::new();
        for order in orders.iter().filter(|o| !holds || o.keeps()) {
            *per_buyer.entry(order.user_id.as_str()).or_default() += 1;
        }
        let over_limit = per_buyer.values().map(|n| n.saturating_sub(limit)).sum();
        violations.count("over_limit", over_limit);
    }
}

/// The most orders that kept a unit at one instant: each counted from the
/// answer of its buy (an order nobody saw made, from the end), until the
/// earliest moment its unit can have gone back ([`given_back_from`]); at
/// one instant, what goes back is counted before what comes in, so the
/// peak is never one the history cannot show. A restock's units are
/// counted off from the moment it was sent (the earliest they can have
/// been on sale).
fn peak_keeping(info: &history::Race, orders: &[Order], seen: &Seen) -> u64 {
    let end = seen.last_us.saturating_add(1);
    let mut marks: Vec<(u64, i64)> = Vec::new();
    for order in orders {
        let enter = seen.bought_at.get(&order.order_id).copied().unwrap_or(end);
        let leave = match info.pay_within_ms > 0 && !order.keeps() {
            true => given_back_from(info, order, seen),
            false => u64::MAX,
        };
        if enter < leave {
            marks.push((enter, 1));
            marks.push((leave, -1));
        }
    }
    marks.extend(seen.additions.iter().map(|&(at, units)| (at, -units)));
    marks.sort_unstable();
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, step) in marks {
        now += step;
        peak = peak.max(now);
    }
    peak as u64
}

/// The earliest moment (µs since the race began) `order`'s unit can have
/// gone back on sale: the start of a cancel that may have happened, or the
/// hold's due time — no give-back takes a hold before it falls due. The
/// due time is put on the race's clock a millisecond early (order ids
/// count whole milliseconds); without the race's start, at 0.
fn given_back_from(info: &history::Race, order: &Order, seen: &Seen) -> u64 {
    let cancelled = seen
        .steps(order.order_id, Op::Cancel)
        .filter(|s| s.completion != Completion::Fail)
        .map(|s| s.start_us)
        .min();
    let due = made_at_ms(order.order_id)
        .filter(|_| info.began_ms > 0)
        .map_or(0, |made| {
            (made + info.pay_within_ms)
                .saturating_sub(info.began_ms + 1)
                .saturating_mul(1_000)
        });
    cancelled.map_or(due, |at| at.min(due))
}

/// `seckill check FILE`: checks every race in the file and prints one line
/// each. `Ok(false)` when any race has a violation.
pub async fn run(args: CheckArgs) -> anyhow::Result<bool> {
    let races = history::read(&args.file)?;
    anyhow::ensure!(!races.is_empty(), "{} holds no race", args.file.display());
    let dbs = OrderDbs::connect_lazy(
        args.databases.postgres()?,
        args.databases.mysql_url.as_deref(),
    )?;
    let mut all_ok = true;
    println!(
        "{:<8} {:<16} {:>6} {:>8} {:>8}  result",
        "product", "strategy", "events", "unknown", "unk.sold"
    );
    for race in &races {
        let verdict = check(&dbs, race).await?;
        all_ok &= verdict.history_ok;
        let result = if verdict.history_ok {
            "history ok".to_owned()
        } else {
            let found: Vec<String> = verdict
                .violations
                .iter()
                .map(|(name, n)| format!("{name}={n}"))
                .collect();
            format!("VIOLATED: {}", found.join(" "))
        };
        println!(
            "{:<8} {:<16} {:>6} {:>8} {:>8}  {result}",
            race.race.product,
            race.race.strategy,
            race.events.len(),
            verdict.unknown,
            verdict.unknown_sold
        );
    }
    dbs.close().await;
    Ok(all_ok)
}

#[cfg(test)]
mod tests {
    use super::history::{Event, Race};
    use super::*;

    fn race(safe: bool, initial: i64, limit: u32, events: Vec<Event>) -> RaceHistory {
        RaceHistory {
            race: Race {
                product: 1,
                epoch: 1,
                strategy: "s".into(),
                safe,
                initial,
                per_user_limit: limit,
                pay_within_ms: 0,
                orders_in: None,
                began_ms: 0,
            },
            events,
        }
    }

    fn event(buyer: &str, completion: Completion, id: Option<Uuid>, left: Option<i64>) -> Event {
        Event {
            op: Op::Buy,
            buyer: buyer.into(),
            start_us: 0,
            end_us: 1,
            completion,
            status: match completion {
                Completion::Ok => 200,
                Completion::Fail => 409,
                Completion::Info => 503,
            },
            code: None,
            order_id: id,
            served_by: None,
            stock_left: left,
            pay_by_ms: None,
            units: None,
        }
    }

    fn order(id: Uuid, user: &str) -> Order {
        Order {
            order_id: id,
            user_id: user.into(),
            state: None,
            paid: false,
        }
    }

    /// An order of a product with holds, in `state`, paid or not.
    fn in_state(state: Option<&str>, paid: bool) -> Order {
        Order {
            state: state.map(str::to_owned),
            paid,
            ..order(Uuid::now_v7(), "x")
        }
    }

    #[test]
    fn a_clean_history_passes_and_counts_unknowns_that_sold() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let history = race(
            true,
            2,
            0,
            vec![
                event("x", Completion::Ok, Some(a), Some(1)),
                event("y", Completion::Info, Some(b), None),
                event("z", Completion::Fail, None, None),
            ],
        );
        let verdict = judge(&history, &[order(a, "x"), order(b, "y")]);
        assert!(verdict.history_ok, "{verdict:?}");
        assert_eq!((verdict.unknown, verdict.unknown_sold), (1, 1));
    }

    #[test]
    fn each_doctored_detail_is_a_violation() {
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let history = race(
            true,
            1,
            1,
            vec![
                event("x", Completion::Ok, Some(a), Some(0)),
                event("x", Completion::Ok, Some(b), Some(0)),
                event("y", Completion::Ok, Some(c), None),
                event("z", Completion::Fail, None, None),
            ],
        );
        let z_order = Uuid::now_v7();
        let verdict = judge(
            &history,
            &[order(a, "x"), order(b, "x"), order(z_order, "z")],
        );
        assert!(!verdict.history_ok);
        let v = |name: &str| verdict.violations.get(name).copied().unwrap_or(0);
        assert_eq!(v("ok_without_order"), 1, "{verdict:?}");
        assert_eq!(v("order_without_ok"), 1, "{verdict:?}");
        assert_eq!(v("oversold"), 2, "{verdict:?}");
        assert_eq!(v("duplicate_unit"), 1, "{verdict:?}");
        assert_eq!(v("over_limit"), 1, "{verdict:?}");
    }

    #[test]
    fn a_request_that_sold_twice_is_a_replay() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let history = race(true, 5, 0, vec![event("x", Completion::Info, None, None)]);
        let verdict = judge(&history, &[order(a, "x"), order(b, "x")]);
        assert_eq!(verdict.violations.get("replayed"), Some(&1), "{verdict:?}");
        assert_eq!(verdict.unknown_sold, 2);
    }

    #[test]
    fn unsafe_strategies_are_held_only_to_the_universal_rules() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let history = race(
            false,
            1,
            0,
            vec![
                event("x", Completion::Ok, Some(a), Some(0)),
                event("y", Completion::Ok, Some(b), Some(0)),
            ],
        );
        let verdict = judge(&history, &[order(a, "x"), order(b, "y")]);
        assert!(verdict.history_ok, "{verdict:?}");
        // Not a violation, but reported: two units kept of one.
        assert_eq!(verdict.peak_kept, 2, "{verdict:?}");
        let wrong = judge(&history, &[order(a, "y"), order(b, "y")]);
        assert_eq!(wrong.violations.get("wrong_buyer"), Some(&1));
    }

    /// A v7 order id made `ms` after the Unix epoch.
    fn made_at(ms: u64) -> Uuid {
        uuid::Builder::from_unix_timestamp_millis(ms, &rand::random()).into_uuid()
    }

    /// A step on `order`, at `start_us`.
    fn step(op: Op, completion: Completion, order: Uuid, start_us: u64) -> Event {
        Event {
            op,
            start_us,
            end_us: start_us + 1,
            ..event("x", completion, Some(order), None)
        }
    }

    #[test]
    fn what_a_buyer_is_told_of_a_payment_is_what_the_table_holds() {
        let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
        let mut history = race(
            false,
            3,
            0,
            vec![
                event("x", Completion::Ok, Some(a), None),
                event("x", Completion::Ok, Some(b), None),
                event("x", Completion::Ok, Some(c), None),
                step(Op::Pay, Completion::Ok, a, 5),
                step(Op::Cancel, Completion::Ok, b, 5),
                step(Op::Pay, Completion::Fail, c, 5),
            ],
        );
        history.race.pay_within_ms = 1_000;
        let paid = |id| Order {
            state: Some("paid".into()),
            paid: true,
            ..order(id, "x")
        };
        let told = judge(&history, &[paid(a), order(b, "x"), order(c, "x")]);
        assert!(told.history_ok, "{told:?}");
        let lied = judge(&history, &[order(a, "x"), paid(b), paid(c)]);
        let v = |name: &str| lied.violations.get(name).copied().unwrap_or(0);
        assert_eq!(
            (
                v("pay_ok_unpaid"),
                v("given_back_then_paid"),
                v("paid_without_pay")
            ),
            (1, 1, 2),
            "{lied:?}"
        );
        assert!(!truthful(&lied.violations));
    }

    #[test]
    fn paid_and_held_are_counted_at_every_instant() {
        // One unit; a's hold falls due 100 ms into the race, and is given
        // back. b buying it after that is a unit sold once; b buying it at
        // 50 ms is two orders on one unit, though only b keeps it at the end.
        let began_ms = 1_000_000;
        let a = made_at(began_ms);
        let b = Uuid::now_v7();
        let expired = Order {
            state: Some("returned".into()),
            ..order(a, "x")
        };
        let at = |end_us| Event {
            end_us,
            ..event("y", Completion::Ok, Some(b), None)
        };
        let mut history = race(true, 1, 0, Vec::new());
        history.race.pay_within_ms = 100;
        history.race.began_ms = began_ms;
        let judged = |history: &RaceHistory, b_at| {
            let mut history = history.clone();
            history.events = vec![event("x", Completion::Ok, Some(a), None), at(b_at)];
            judge(&history, &[expired.clone(), order(b, "y")])
        };
        assert!(judged(&history, 150_000).history_ok);
        let early = judged(&history, 50_000);
        assert_eq!(early.violations.get("oversold"), Some(&1), "{early:?}");
        // A cancel started at 20 ms gives the unit back from there on.
        let mut cancelled = history.clone();
        cancelled.events = vec![
            event("x", Completion::Ok, Some(a), None),
            step(Op::Cancel, Completion::Ok, a, 20_000),
            at(50_000),
        ];
        let verdict = judge(&cancelled, &[expired.clone(), order(b, "y")]);
        assert!(verdict.history_ok, "{verdict:?}");
    }

    #[test]
    fn with_holds_only_held_and_paid_orders_keep_a_unit() {
        let mut history = race(true, 2, 1, Vec::new());
        history.race.pay_within_ms = 1_000;
        let orders = [
            in_state(None, false),
            in_state(Some("paid"), true),
            in_state(Some("returned"), false),
            in_state(Some("expired"), false),
        ];
        let verdict = judge(&history, &orders);
        let v = |name: &str| verdict.violations.get(name).copied().unwrap_or(0);
        // Four orders of buyer x on two units with a limit of one: only
        // the two that keep a unit count, one above the limit.
        assert_eq!((v("oversold"), v("over_limit")), (0, 1), "{verdict:?}");
        let naive = [
            in_state(None, false),
            in_state(Some("returned"), true),
            in_state(None, false),
        ];
        let verdict = judge(&history, &naive);
        assert_eq!(verdict.violations.get("oversold"), Some(&1), "{verdict:?}");
        assert_eq!(verdict.violations.get("paid_and_given_back"), Some(&1));
    }
}
