//! What the order-life scenarios share (`late-payment`, `reaper-crash`,
//! `abandoned-carts`): the products they race under each give-back
//! mechanism, paying for holds, and the row's order-life columns.

use std::time::Duration;

use uuid::Uuid;

use super::{Ctx, ScenarioRow};
use crate::lab::client::Gateway;
use crate::model::info::Scenario;
use crate::model::product::Settings;
use crate::model::product::hold_terms::Giveback;
use crate::race::driver::{Attempt, Row};
use crate::race::payer::LifeOutcome;

/// The strategies (with their store) an order-life scenario races under
/// every mechanism: the Lua script on Redis, the conditional update on
/// PostgreSQL and on MySQL.
pub const SELLERS: [(&str, Option<crate::model::product::StoreKind>); 3] = [
    ("redis-lua", None),
    ("db-atomic", None),
    ("db-atomic", Some(crate::model::product::StoreKind::Mysql)),
];

/// The label of a seller under a mechanism: `db-atomic@mysql/naive-cron`.
pub fn variant(
    strategy: &str,
    store: Option<crate::model::product::StoreKind>,
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
    store: Option<crate::model::product::StoreKind>,
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

/// Pays for every hold in `holds` at once: each payment, for the race's
/// history.
pub async fn pay_all(target: &Gateway, holds: &[(Uuid, String)]) -> Vec<Attempt> {
    let pays = holds
        .iter()
        .map(|(order, buyer)| Attempt::pay(target, *order, buyer));
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
        target: &Gateway,
        race: LifeRace<'_>,
        met: impl FnOnce(&Row, &LifeOutcome) -> bool,
    ) -> anyhow::Result<ScenarioRow> {
        let row = self
            .scripted_row(target, race.product, race.attempts, race.started)
            .await?;
        let mut row = row;
        // Reported, not repaired: a unit given back twice shows as a
        // counter above its truth, a stranded one below.
        let reconciled = target.reconcile(false, Some(race.product)).await?.pop();
        let life = row.life.get_or_insert_default();
        life.all_paid_ms = race.all_paid_ms;
        life.drift = reconciled.as_ref().map_or(0, |d| d.drift);
        life.owed = reconciled.as_ref().map_or(0, |d| d.owed);
        let life = life.clone();
        let honest = row.client_ok + row.unknown_sold == row.sold
            && crate::judge::check::truthful(&row.violations);
        Ok(ScenarioRow {
            met: honest && met(&row, &life),
            expected: race.expected.to_owned(),
            scenario: race.scenario.name().to_owned(),
            variant: race.variant,
            row,
            masters: Vec::new(),
            cut: None,
            reconciled,
            slowdown: None,
            window: None,
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
    /// Every buy and every payment.
    pub attempts: &'a [Attempt],
    /// When the race began.
    pub started: std::time::Instant,
    /// `abandoned-carts`: when the last unit was paid.
    pub all_paid_ms: Option<u64>,
}
