//! What the catalogue says about a strategy ([`Info`]) and the vocabulary
//! of its expectations ([`Hazard`], [`Expect`]).
//!
//! Plain data at the bottom of the crate, written once as data in
//! `catalogue.json` (one entry per strategy, in catalogue order): a lock's
//! file holds the mechanism, not its description, and the service, the
//! scenarios, the tests, the JMeter CSV and the docs' table all read
//! "which strategies" and "what is expected" from here instead of keeping
//! lists of names. Each strategy finds its entry by id ([`entry`]).

mod scenario;

use std::fmt;
use std::sync::LazyLock;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use utoipa::ToSchema;

use crate::model::product::{Recipe, StoreKind};
pub use scenario::Scenario;

/// The situations the scenarios reproduce, each with its own topology,
/// settings and fault (see `seckill race --scenario`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Hazard {
    /// Many buyers at once through two instances, default settings
    /// (`contention`, `seckill race`, the JMeter plan). Every strategy
    /// declares this one.
    Contention,
    /// The same race sent to one instance, then to two
    /// (`two-instances-local-lock`); the declared outcome is on two.
    SecondInstance,
    /// Work longer than the lock's lease (`lease-expiry`).
    LeaseExpiry,
    /// The holder's process frozen past its lease (`frozen-holder`).
    FrozenHolder,
    /// The holder's process killed inside its critical section
    /// (`holder-crash`).
    HolderCrash,
    /// A minority of the RedLock masters down (`redlock-minority-down`).
    MinorityDown,
    /// The holder cut off from its lock's backend (a blackholed link) for
    /// longer than its lease or session, with its stock on a backend it
    /// still reaches, and work the lock is otherwise safe with
    /// (`partition`, variant `lock-only`).
    Partition,
    /// The same partition, with the stock on the lock's backend too: the
    /// holder's write goes into the partition, its buyer is told the
    /// outcome is unknown, and the write lands when the link heals — the
    /// "delayed packet" (`partition`, variant `lock+store`).
    PartitionWithStore,
    /// The main Redis's master killed with writes its replica never got,
    /// and the replica promoted by Sentinel (`redis-failover`): whatever
    /// those writes held — a lock, a fencing token, a decrement — is gone.
    Failover,
    /// The same race under REPEATABLE READ on PostgreSQL and on MySQL's
    /// InnoDB (`repeatable-read`): the declared outcome is InnoDB's; the
    /// PostgreSQL row is the control, expected never to oversell.
    RepeatableRead,
}

/// What a strategy is expected to do in a race. Every expectation also
/// requires `client_ok == sold`: a 200 without an order is never
/// acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// Sells more than the stock.
    Oversells,
    /// Never sells more than the stock.
    NoOversell,
    /// Sells exactly the stock, no more.
    SellsAll,
    /// Sells nothing: a lock nobody can take, every buyer busy.
    Stalls,
    /// Behind tight limits: both the gateway and the service answer 429,
    /// some buyers still buy, nothing is oversold, and every answer is a
    /// sale, a 429 or `sold_out`.
    Throttled,
    /// With a sale window: nothing sold before the opening, the buyers
    /// who came early told `not_started`, the stock sold after it.
    OpensOnTime,
}

impl Expect {
    /// The expectation in words, as the scenario tables print it.
    pub fn text(self) -> &'static str {
        match self {
            Self::Oversells => "oversells (oversold > 0)",
            Self::NoOversell => "oversold = 0",
            Self::SellsAll => "sells exactly the stock, oversold = 0",
            Self::Stalls => "stalls: sold = 0, buyers busy",
            Self::Throttled => "429s from gateway and service, counted apart; sells; oversold = 0",
            Self::OpensOnTime => {
                "nothing sold before the opening (early buyers not_started), the stock after it"
            }
        }
    }
}

/// A strategy's catalogue entry (`GET /strategies`, `seckill strategies`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Info {
    /// Catalogue id, as used in the reset body.
    pub id: &'static str,
    /// The backends the mechanism involves.
    pub backend: &'static str,
    /// Where the stock counter lives unless the product's `store` says
    /// otherwise.
    pub store: StoreKind,
    /// The `store` settings it can sell from (its own first): a reset
    /// naming another is refused, so no product is laid out in one store
    /// and sold from another.
    // A locked strategy takes every store: its lock guards the read and
    // the write of whichever holds the counter.
    pub stores: Vec<StoreKind>,
    /// One line: how it protects the counter.
    pub mechanism: &'static str,
    /// Whether it is expected never to oversell at default settings on
    /// several instances; `seckill race` fails when a safe one oversells.
    pub safe: bool,
    /// The failures it survives, in words.
    pub safe_against: &'static str,
    /// The failures it does not survive, in words.
    pub unsafe_against: &'static str,
    /// What it does under each hazard a scenario reproduces for it; a
    /// scenario races exactly the strategies that list its hazard.
    #[serde(serialize_with = "as_map", deserialize_with = "from_map")]
    #[schema(value_type = std::collections::BTreeMap<Hazard, Expect>)]
    pub under: Vec<(Hazard, Expect)>,
    /// The `recipe` settings it takes besides the default (`mutex`), each
    /// raced as a row of its own in the comparison.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipes: Vec<Recipe>,
}

impl Info {
    /// The expected outcome under `hazard`, if the strategy is raced there.
    pub fn expect(&self, hazard: Hazard) -> Option<Expect> {
        self.under
            .iter()
            .find(|(h, _)| *h == hazard)
            .map(|(_, e)| *e)
    }
}

/// `under` as a JSON object (`{"contention": "no-oversell", …}`).
fn as_map<S: Serializer>(under: &[(Hazard, Expect)], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(under.iter().map(|(h, e)| (h, e)))
}

/// `under` from its JSON object, in the order written (the order the
/// catalogue prints).
fn from_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<(Hazard, Expect)>, D::Error> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Vec<(Hazard, Expect)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object of hazard: expectation")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut pairs = Vec::new();
            while let Some(pair) = map.next_entry()? {
                pairs.push(pair);
            }
            Ok(pairs)
        }
    }
    deserializer.deserialize_map(Pairs)
}

/// Every strategy's entry, in catalogue order, read once from the data
/// compiled into the binary (its strings borrowed from it, never copied).
static ENTRIES: LazyLock<Vec<Info>> = LazyLock::new(|| {
    serde_json::from_str(include_str!("catalogue.json"))
        .expect("catalogue.json is valid: every test reads it")
});

/// Every entry, in catalogue order.
pub fn entries() -> &'static [Info] {
    &ENTRIES
}

/// The entry of the strategy `id`, which its own file names: an id
/// missing from the data is a bug that every test of that strategy hits.
pub fn entry(id: &str) -> &'static Info {
    ENTRIES
        .iter()
        .find(|info| info.id == id)
        .unwrap_or_else(|| panic!("{id} has no entry in catalogue.json"))
}
