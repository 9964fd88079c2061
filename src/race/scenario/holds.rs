//! What the order-life scenarios share (`late-payment`, `reaper-crash`,
//! `abandoned-carts`): the products they race under each give-back
//! mechanism, paying for holds, and the row's order-life columns.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{Ctx, ScenarioRow};
use crate::info::Scenario;
use crate::ledger::Ledger;
use crate::product::Settings;
use crate::product::life::Giveback;
use crate::race::client::{OrderAction, Target};
use crate::race::driver::{Attempt, Row};

/// What a row of an order-life scenario adds to the race's numbers.
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
    /// The ledger's order-life columns, under `giveback`.
    pub fn of(ledger: &Ledger, giveback: Giveback) -> Self {
        Self {
            giveback: giveback.as_str().to_owned(),
            held: ledger.held,
            paid: ledger.paid,
            expired: ledger.expired,
            returned: ledger.returned,
            stranded: ledger.stranded,
            paid_and_returned: ledger.paid_and_returned,
            ..Self::default()
        }
    }

    /// Counts `answers` to payments.
    pub fn count_pays(&mut self, answers: &[(u16, String)]) {
        self.pays_ok += answers.iter().filter(|(s, _)| *s == 200).count() as u64;
        self.pays_expired += answers.iter().filter(|(_, said)| said == "expired").count() as u64;
    }
}

/// The strategies (with their store) an order-life scenario races under
/// every mechanism: the Lua script on Redis, the conditional update on
/// PostgreSQL and on MySQL.
pub const SELLERS: [(&str, Option<crate::product::StoreKind>); 3] = [
    ("redis-lua", None),
    ("db-atomic", None),
    ("db-atomic", Some(crate::product::StoreKind::Mysql)),
];

/// The label of a seller under a mechanism: `db-atomic@mysql/naive-cron`.
pub fn variant(
    strategy: &str,
    store: Option<crate::product::StoreKind>,
    giveback: Giveback,
) -> String {
    match store {
        Some(store) => format!("{strategy}@{}/{}", store.as_str(), giveback.as_str()),
        None => format!("{strategy}/{}", giveback.as_str()),
    }
}

/// Settings with holds of `pay_within_ms`, given back by `giveback` with
/// `pause_ms` between its steps.
pub fn holding(
    store: Option<crate::product::StoreKind>,
    giveback: Giveback,
    pay_within_ms: u64,
    pause_ms: u64,
) -> Settings {
    Settings {
        store,
        pay_within_ms,
        giveback,
        reaper_pause_ms: pause_ms,
        ..Settings::default()
    }
}

/// The holds `attempts` got: (order, buyer).
pub fn holds_of(attempts: &[Attempt]) -> Vec<(Uuid, String)> {
    attempts
        .iter()
        .filter(|a| a.answer.status == 200)
        .filter_map(|a| Some((a.answer.order_id?, a.buyer.clone())))
        .collect()
}

/// Pays for every hold in `holds` at once: each answer's status and what
/// it said.
pub async fn pay_all(target: &Target, holds: &[(Uuid, String)]) -> Vec<(u16, String)> {
    let pays = holds.iter().map(|(order, buyer)| async move {
        let answer = target.order(OrderAction::Pay, *order, buyer).await;
        (answer.status, answer.said)
    });
    futures::future::join_all(pays).await
}

/// Waits until `check` holds, polling every 50 ms, for at most `limit`.
pub async fn wait_for<F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let started = std::time::Instant::now();
    while !check().await? {
        anyhow::ensure!(started.elapsed() < limit, "{what}: not after {limit:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

impl Ctx {
    /// The row of an order-life race: the scripted row (every buy's
    /// answer, the history check), its order-life columns, judged by
    /// `met`.
    pub(super) async fn life_row(
        &self,
        target: &Target,
        race: LifeRace<'_>,
        met: impl FnOnce(&Row, &LifeOutcome) -> bool,
    ) -> anyhow::Result<ScenarioRow> {
        let row = self
            .scripted_row(target, race.product, race.attempts, race.started)
            .await?;
        let ledger = target.ledger(race.product).await?;
        let mut life = LifeOutcome::of(&ledger, race.giveback);
        life.count_pays(race.pays);
        life.all_paid_ms = race.all_paid_ms;
        // Reported, not repaired: a unit given back twice shows as a
        // counter above its truth, a stranded one below.
        let reconciled = target.reconcile(false, Some(race.product)).await?.pop();
        life.drift = reconciled.as_ref().map_or(0, |d| d.drift);
        life.owed = reconciled.as_ref().map_or(0, |d| d.owed);
        let honest =
            row.client_ok + row.unknown_sold == row.sold && crate::check::truthful(&row.violations);
        Ok(ScenarioRow {
            met: honest && met(&row, &life),
            expected: race.expected.to_owned(),
            scenario: race.scenario.name().to_owned(),
            variant: race.variant,
            row,
            masters: Vec::new(),
            cut: None,
            life: Some(life),
            reconciled,
        })
    }
}

/// One order-life race's record, for [`Ctx::life_row`].
pub struct LifeRace<'a> {
    /// The scenario.
    pub scenario: Scenario,
    /// The row's variant.
    pub variant: String,
    /// What it expects, in words.
    pub expected: &'a str,
    /// The product raced.
    pub product: i64,
    /// Its mechanism.
    pub giveback: Giveback,
    /// Every buy.
    pub attempts: &'a [Attempt],
    /// Every payment's answer.
    pub pays: &'a [(u16, String)],
    /// When the race began.
    pub started: std::time::Instant,
    /// `abandoned-carts`: when the last unit was paid.
    pub all_paid_ms: Option<u64>,
}
