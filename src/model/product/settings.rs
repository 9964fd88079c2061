//! Per-product knobs of a strategy, as sent in the reset body.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::hold_terms::Giveback;
use crate::model::error::{ApiError, Invalid};

/// Upper bound of every millisecond knob: a minute is already absurd for
/// simulated work and keeps a typo from parking a request for hours.
pub const MAX_MS: u64 = 60_000;
/// Upper bound of `max_retries`.
pub const MAX_RETRIES: u32 = 10_000;
/// Upper bound of `segments`.
pub const MAX_SEGMENTS: u32 = 64;
/// Upper bound of `per_user_limit`.
pub const MAX_PER_USER: u32 = 1_000_000;
/// Upper bound of `waves`.
pub const MAX_WAVES: u32 = 100;
/// Upper bound of `wave_every_ms`: a week.
pub const MAX_WAVE_EVERY_MS: u64 = 604_800_000;
/// Upper bound of `pay_within_ms`: a day.
pub const MAX_PAY_WITHIN_MS: u64 = 86_400_000;
/// Upper bound of `opens_at_ms` and `closes_at_ms`: the year 3000, in ms
/// since the Unix epoch (a seconds value sent by mistake is far below).
pub const MAX_TIME_MS: u64 = 32_503_680_000_000;

/// Which store holds a product's stock. Here, at the bottom, because a
/// product's settings name it; the stores themselves live in
/// `store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// `seckill:{s<shard>}:{id}:stock` in Redis; orders go through the
    /// shard's stream.
    Redis,
    /// `products.stock` in PostgreSQL; orders inserted in the transaction.
    Postgres,
    /// `products.stock` in MySQL/InnoDB (MariaDB), the articles' own
    /// database; orders inserted in the transaction, into MySQL's
    /// `orders`. The product's definition stays in PostgreSQL.
    Mysql,
}

impl StoreKind {
    /// Every store.
    pub const ALL: [Self; 3] = [Self::Redis, Self::Postgres, Self::Mysql];

    /// The name the `store` setting takes, and a race label's suffix
    /// (`db-atomic@mysql`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Redis => "redis",
            Self::Postgres => "postgres",
            Self::Mysql => "mysql",
        }
    }

    /// The store called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// RedLock's agreement rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Quorum {
    /// More than half of the masters.
    #[default]
    Majority,
    /// Every master (MultiLock): one master down means no lock.
    All,
}

/// Which of Curator's lock recipes the `zookeeper` strategy follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Recipe {
    /// `InterProcessMutex`: one queue of lock nodes, each waiter watching
    /// its predecessor.
    #[default]
    Mutex,
    /// `InterProcessSemaphoreMutex`: a semaphore of one lease, its lease
    /// nodes counted under a mutex of its own; not re-entrant.
    SemaphoreMutex,
    /// `InterProcessReadWriteLock`: buyers take the write lock, stock
    /// queries (`GET /stock/{id}`) the read lock; readers share it.
    ReadWrite,
    /// `InterProcessMultiLock`: all of several locks — the buyer's own,
    /// then the product's — taken in that order, released in reverse.
    MultiLock,
}

impl Recipe {
    /// Every recipe, the default first.
    pub const ALL: [Self; 4] = [
        Self::Mutex,
        Self::SemaphoreMutex,
        Self::ReadWrite,
        Self::MultiLock,
    ];

    /// The recipe's name in a reset body, and in a race label
    /// (`zookeeper:read-write`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutex => "mutex",
            Self::SemaphoreMutex => "semaphore-mutex",
            Self::ReadWrite => "read-write",
            Self::MultiLock => "multi-lock",
        }
    }

    /// The recipe called `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }
}

/// Per-product knobs of a strategy.
///
/// Defaults keep the safe strategies fast; the races that demonstrate a
/// failure set `work_ms`/`lease_ms` explicitly.
///
/// The bounds in the `#[schema]` attributes are the ones [`Settings::validate`]
/// enforces (literals, as the derive needs); a unit test holds the two
/// together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Simulated business work inside the critical section (or the
    /// transaction), in ms: what makes races and lease expiry reproducible.
    #[schema(minimum = 0, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub work_ms: u64,
    /// Lock time-to-live in ms for the lease-based locks.
    #[schema(minimum = 1, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub lease_ms: u64,
    /// How long a buyer waits for a lock before giving up as `busy`.
    #[schema(minimum = 0, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub acquire_timeout_ms: u64,
    /// How often an optimistic update is retried before giving up as `busy`.
    #[schema(minimum = 0, maximum = 10_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub max_retries: u32,
    /// Where a locked strategy keeps the stock (default: the strategy's
    /// own backend), so "RedLock guarding a PostgreSQL row" is one reset
    /// away.
    pub store: Option<StoreKind>,
    /// Stock segments of `segmented`.
    #[schema(minimum = 1, maximum = 64)]
    #[serde(deserialize_with = "super::whole_number")]
    pub segments: u32,
    /// How many RedLock masters must agree: a majority, or all of them
    /// (the articles' MultiLock).
    pub quorum: Quorum,
    /// `zookeeper` only: which of Curator's recipes locks the product.
    /// Other strategies refuse anything but the default.
    pub recipe: Recipe,
    /// `setnx-naive` only: a pause between its SETNX and its EXPIRE, which
    /// widens the window where a crash leaves a lock that never expires.
    #[schema(minimum = 0, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub crash_gap_ms: u64,
    /// Units one buyer may hold of the product; 0 = unlimited. Enforced in
    /// the same atomic step as the decrement (see the `limit` module).
    #[schema(minimum = 0, maximum = 1_000_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub per_user_limit: u32,
    /// When the sale opens, in ms since the Unix epoch; 0 = open from the
    /// reset. Before it a buy is refused with 403 `not_started` and the
    /// seconds left, touching no backend.
    #[schema(minimum = 0, maximum = 32_503_680_000_000_u64)]
    #[serde(deserialize_with = "super::whole_number")]
    pub opens_at_ms: u64,
    /// When the sale closes, in ms since the Unix epoch; 0 = never; else
    /// it must come after `opens_at_ms`. From then on a buy is refused
    /// with 410 `ended`.
    #[schema(minimum = 0, maximum = 32_503_680_000_000_u64)]
    #[serde(deserialize_with = "super::whole_number")]
    pub closes_at_ms: u64,
    /// The sale is paused: inside its window a buy is refused with 403
    /// `not_started` (no `seconds_left`: nobody knows when it resumes),
    /// touching no backend, until `POST /admin/products/{id}/window`
    /// resumes it. Usually set by that operation on a live sale; a reset
    /// may start a sale paused, to open it by hand.
    pub paused: bool,
    /// Pre-booking: until `opens_at_ms` (which it needs) buyers reserve
    /// with `POST /stock/{id}/reserve`; from the opening only a buyer
    /// holding a reservation may buy (403 `not_reserved` otherwise).
    pub prebooking: bool,
    /// A buy path bots cannot hit early: the plain buy path answers 403
    /// `bad_path`; inside the sale window an identified buyer gets a
    /// one-time path of its own from `GET /stock/{id}/path` (bound to the
    /// buyer, the product and this reset; valid 10 s) and buys on
    /// `POST /stock/{id}/buy/{path}`.
    #[serde(default)]
    pub hidden_path: bool,
    /// Release in waves: the stock is put on sale in this many equal
    /// shares (the remainder in the first ones), wave `w` (from 1) at
    /// `opens_at_ms + (w - 1) × wave_every_ms`; 1 = all at once. A reset
    /// without an opening opens at once.
    #[schema(minimum = 1, maximum = 100)]
    #[serde(deserialize_with = "super::whole_number")]
    pub waves: u32,
    /// Time between two waves, in ms.
    #[schema(minimum = 0, maximum = 604_800_000_u64)]
    #[serde(deserialize_with = "super::whole_number")]
    pub wave_every_ms: u64,
    /// How long a buyer has to pay, in ms; 0 = no payment step: a 200 is
    /// a sold unit. Otherwise a 200 is a hold (`status: held`, `pay_by_ms`)
    /// that counts against the stock until it is paid
    /// (`POST /orders/{id}/pay`), or cancelled or overdue, when its unit
    /// goes back on sale.
    #[schema(minimum = 0, maximum = 86_400_000_u64)]
    #[serde(deserialize_with = "super::whole_number")]
    pub pay_within_ms: u64,
    /// How an overdue or cancelled hold's unit goes back on sale.
    pub giveback: Giveback,
    /// A pause between the give-back's steps (the reaper's knob that makes
    /// its races reproducible: a payment landing inside it, a crash).
    #[schema(minimum = 0, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub reaper_pause_ms: u64,
    /// A pause after reconciliation's repair reads the stock and after it
    /// counts the orders (the knob that lands a put-back and a sale in
    /// those gaps: what its compare-and-set must catch).
    #[schema(minimum = 0, maximum = 60_000)]
    #[serde(deserialize_with = "super::whole_number")]
    pub repair_pause_ms: u64,
}

/// Now on this machine's wall clock, in ms since the Unix epoch: for
/// logs, the live view's seconds and the tools. The sale window, holds
/// and waves are judged on the shared clock instead
/// (the backends' `clock`), which every instance agrees on.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64
}

/// Where a moment falls in a product's sale window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// Buys are taken.
    Open,
    /// The sale opens in this many ms.
    NotStarted(u64),
    /// The operator paused the sale; nobody knows until when.
    Paused,
    /// The sale has closed.
    Ended,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            work_ms: 0,
            lease_ms: 5_000,
            acquire_timeout_ms: 5_000,
            max_retries: 20,
            store: None,
            segments: 8,
            quorum: Quorum::Majority,
            recipe: Recipe::Mutex,
            crash_gap_ms: 0,
            per_user_limit: 0,
            opens_at_ms: 0,
            closes_at_ms: 0,
            paused: false,
            prebooking: false,
            hidden_path: false,
            waves: 1,
            wave_every_ms: 0,
            pay_within_ms: 0,
            giveback: Giveback::DelayQueue,
            reaper_pause_ms: 0,
            repair_pause_ms: 0,
        }
    }
}

impl Settings {
    /// Rejects values that are out of range instead of clamping them, so a
    /// caller never races under settings it did not ask for.
    pub fn validate(&self) -> Result<(), Invalid> {
        let check = |name: &str, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                Err(Invalid(format!(
                    "{name} must be between {min} and {max}, got {value}"
                )))
            } else {
                Ok(())
            }
        };
        check("work_ms", self.work_ms, 0, MAX_MS)?;
        check("lease_ms", self.lease_ms, 1, MAX_MS)?;
        check("acquire_timeout_ms", self.acquire_timeout_ms, 0, MAX_MS)?;
        check(
            "max_retries",
            self.max_retries.into(),
            0,
            MAX_RETRIES.into(),
        )?;
        check("segments", self.segments.into(), 1, MAX_SEGMENTS.into())?;
        check("crash_gap_ms", self.crash_gap_ms, 0, MAX_MS)?;
        check(
            "per_user_limit",
            self.per_user_limit.into(),
            0,
            MAX_PER_USER.into(),
        )?;
        check("opens_at_ms", self.opens_at_ms, 0, MAX_TIME_MS)?;
        check("closes_at_ms", self.closes_at_ms, 0, MAX_TIME_MS)?;
        check("waves", self.waves.into(), 1, MAX_WAVES.into())?;
        check("wave_every_ms", self.wave_every_ms, 0, MAX_WAVE_EVERY_MS)?;
        check("pay_within_ms", self.pay_within_ms, 0, MAX_PAY_WITHIN_MS)?;
        check("reaper_pause_ms", self.reaper_pause_ms, 0, MAX_MS)?;
        check("repair_pause_ms", self.repair_pause_ms, 0, MAX_MS)?;
        if self.closes_at_ms != 0 && self.closes_at_ms <= self.opens_at_ms {
            return Err(Invalid(format!(
                "closes_at_ms ({}) must come after opens_at_ms ({})",
                self.closes_at_ms, self.opens_at_ms
            )));
        }
        if self.prebooking && self.opens_at_ms == 0 {
            return Err(Invalid(
                "prebooking needs opens_at_ms: reservations are taken until the sale opens".into(),
            ));
        }
        Ok(())
    }

    /// How many waves are on sale at `now_ms`: 0 before the opening, then
    /// one more every `wave_every_ms`, up to `waves`.
    pub fn waves_due(&self, now_ms: u64) -> u32 {
        if now_ms < self.opens_at_ms {
            return 0;
        }
        let waves = self.waves.max(1);
        match self.wave_every_ms {
            0 => waves,
            every => ((now_ms - self.opens_at_ms) / every)
                .saturating_add(1)
                .min(u64::from(waves)) as u32,
        }
    }

    /// When wave `w` (from 1) goes on sale.
    pub fn wave_opens_at(&self, w: u32) -> u64 {
        self.opens_at_ms + u64::from(w.saturating_sub(1)) * self.wave_every_ms
    }

    /// Where `now_ms` (ms since the Unix epoch) falls in the sale window.
    /// Callers pass the shared clock's time (`backends.clock`, Redis's
    /// TIME read once a second), so every instance judges the opening at
    /// the same moment whatever its own clock says.
    /// A closed sale is `Ended` even when paused, and a paused one
    /// `Paused` even before its opening: the opening will not open it.
    pub fn window(&self, now_ms: u64) -> Window {
        if self.closes_at_ms != 0 && now_ms >= self.closes_at_ms {
            Window::Ended
        } else if self.paused {
            Window::Paused
        } else if now_ms < self.opens_at_ms {
            Window::NotStarted(self.opens_at_ms - now_ms)
        } else {
            Window::Open
        }
    }

    /// Whether buys at `now_ms` (the shared clock's) are taken; the
    /// refusal a buyer gets otherwise.
    pub fn admits(&self, now_ms: u64) -> Result<(), ApiError> {
        match self.window(now_ms) {
            Window::Open => Ok(()),
            Window::NotStarted(ms) => Err(ApiError::NotStarted {
                starts_in: std::time::Duration::from_millis(ms),
                opens_at_ms: self.opens_at_ms,
            }),
            Window::Paused => Err(ApiError::Paused),
            Window::Ended => Err(ApiError::Ended),
        }
    }

    /// Whether reservations are taken at `now_ms`: before the opening,
    /// paused or not, and not after a close.
    pub fn reservable(&self, now_ms: u64) -> bool {
        now_ms < self.opens_at_ms && self.window(now_ms) != Window::Ended
    }
}
