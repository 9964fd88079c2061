//! Overload protection per backend path — a product's strategy and the
//! store it sells from (`db-atomic@postgres`) — in front of the sale: an
//! adaptive concurrency limit ([`limit`]) and a circuit breaker
//! ([`breaker`]). Per path, so that a slow PostgreSQL does not starve a
//! sale on Redis: the latency a path measures is its own, and a slow
//! PostgreSQL slows every path through it, each closing its own limit.
//! Not per backend: a Redis lock guarding PostgreSQL stock is slow
//! because of PostgreSQL, and a breaker keyed by Redis would refuse
//! `redis-lua` for it.
//!
//! A refused request is answered at once, 503 `busy` with `Retry-After`,
//! before the Idempotency-Key is claimed: nothing was done. An admitted
//! one holds its [`Permit`] until its strategy answers, in the sale's own
//! task: a buyer who hung up does not free the slot while the backend
//! still works for them.

pub mod breaker;
pub mod limit;
mod window;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use self::breaker::{Breaker, State, Trip, Verdict};
use self::limit::{Limit, Slot};
use crate::model::error::ApiError;
use crate::model::product::StoreKind;
use crate::model::telemetry::GuardMetrics;

/// How the guards are tuned, and which are on.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The adaptive limit's latency target, or `None` with it off.
    pub target: Option<Duration>,
    /// The fewest requests in flight a path's limit allows.
    pub floor: usize,
    /// The most: the instance's own cap on requests in flight.
    pub ceiling: usize,
    /// The breaker's trip, or `None` with it off.
    pub trip: Option<Trip>,
}

/// A path: the strategy and its store's name.
type Path = (&'static str, &'static str);

/// Every path's guards, made on a path's first buy.
pub struct Guards {
    tuning: Tuning,
    paths: RwLock<HashMap<Path, Arc<PathGuard>>>,
}

/// Where a listed product keeps its path's guards once its first buy
/// found them: every later buy of it reads them without the map.
pub type PathSlot = OnceLock<Arc<PathGuard>>;

/// One path's limit and breaker.
pub struct PathGuard {
    name: String,
    limit: Option<Limit>,
    breaker: Option<Breaker>,
    metrics: GuardMetrics,
}

/// An admitted request's hold on its path: given back, with what the
/// strategy answered, by [`Permit::answered`], or by dropping it.
pub struct Permit {
    path: Arc<PathGuard>,
    /// Its slot under the limit (`None` with the limit off).
    slot: Option<Slot>,
    admitted: Instant,
    /// The product's own simulated work, which is not the backend's time.
    work: Duration,
    probe: bool,
    answered: bool,
}

/// One path as `/config` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PathState {
    /// `strategy@store`.
    pub path: String,
    /// The adaptive limit now (absent with it off).
    pub limit: Option<usize>,
    /// Requests in flight on it.
    pub in_flight: usize,
    /// The breaker's state (absent with it off).
    pub breaker: Option<State>,
}

impl Guards {
    /// Guards tuned by `tuning`.
    pub fn new(tuning: Tuning) -> Self {
        Self {
            tuning,
            paths: RwLock::new(HashMap::new()),
        }
    }

    fn path(&self, path: Path) -> Arc<PathGuard> {
        if let Some(guard) = self
            .paths
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&path)
        {
            return guard.clone();
        }
        let mut paths = self.paths.write().unwrap_or_else(|e| e.into_inner());
        let tuning = self.tuning;
        paths
            .entry(path)
            .or_insert_with(|| {
                let name = format!("{}@{}", path.0, path.1);
                Arc::new(PathGuard {
                    metrics: GuardMetrics::of(&name),
                    name,
                    limit: tuning
                        .target
                        .map(|target| Limit::new(tuning.floor, tuning.ceiling, target)),
                    breaker: tuning.trip.map(Breaker::new),
                })
            })
            .clone()
    }

    /// Admits a buy of a product sold by `strategy` from `store`, whose
    /// own simulated work is `work`, its path's guards kept in `slot`;
    /// `None` with both guards off.
    pub fn admit(
        &self,
        slot: &PathSlot,
        (strategy, store): (&'static str, StoreKind),
        work: Duration,
    ) -> Result<Option<Permit>, ApiError> {
        if self.tuning.target.is_none() && self.tuning.trip.is_none() {
            return Ok(None);
        }
        let path = slot
            .get_or_init(|| self.path((strategy, store.as_str())))
            .clone();
        let now = Instant::now();
        let verdict = path
            .breaker
            .as_ref()
            .map_or(Verdict::Pass, |b| b.admit(now));
        if let Verdict::Refuse(open_for) = verdict {
            path.metrics.shed_by_breaker();
            return Err(ApiError::Busy {
                message: format!("{}: its circuit breaker is open", path.name),
                retry_after: open_for.max(Duration::from_secs(1)),
            });
        }
        let probe = verdict == Verdict::Probe;
        let slot = path.limit.as_ref().map(Limit::try_acquire);
        if let (Some(limit), Some(None)) = (&path.limit, slot) {
            if probe && let Some(breaker) = &path.breaker {
                breaker.answered(now, true, None);
            }
            path.metrics.shed_by_limit();
            return Err(ApiError::Busy {
                message: format!(
                    "{}: over its adaptive limit of {} in flight",
                    path.name,
                    limit.limit()
                ),
                retry_after: Duration::from_secs(1),
            });
        }
        path.metrics
            .limit(path.limit.as_ref().map(|l| (l.limit(), l.in_flight())));
        Ok(Some(Permit {
            path,
            slot: slot.flatten(),
            admitted: now,
            work,
            probe,
            answered: false,
        }))
    }

    /// Every path seen so far, by name.
    pub fn paths(&self) -> Vec<PathState> {
        let paths = self.paths.read().unwrap_or_else(|e| e.into_inner());
        let mut states: Vec<_> = paths
            .values()
            .map(|p| PathState {
                path: p.name.clone(),
                limit: p.limit.as_ref().map(Limit::limit),
                in_flight: p.limit.as_ref().map_or(0, Limit::in_flight),
                breaker: p.breaker.as_ref().map(Breaker::state),
            })
            .collect();
        states.sort_by(|a, b| a.path.cmp(&b.path));
        states
    }
}

impl Permit {
    /// The strategy answered (`failed`: with an error or an unknown
    /// outcome): the latency, less the product's own work, moves the
    /// limit and is counted by the breaker.
    pub fn answered(mut self, failed: bool) {
        self.answered = true;
        let now = Instant::now();
        let latency = now
            .saturating_duration_since(self.admitted)
            .saturating_sub(self.work);
        let path = &self.path;
        if let (Some(limit), Some(slot)) = (&path.limit, self.slot) {
            if failed {
                limit.release();
            } else {
                limit.answered(slot, latency, now);
            }
        }
        if let Some(breaker) = &path.breaker {
            let bad = breaker.bad(latency, failed);
            path.metrics
                .breaker(breaker.answered(now, self.probe, Some(bad)).gauge());
        }
        path.metrics
            .limit(path.limit.as_ref().map(|l| (l.limit(), l.in_flight())));
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let path = &self.path;
        if let Some(limit) = &path.limit {
            limit.release();
        }
        if let Some(breaker) = &path.breaker {
            path.metrics
                .breaker(breaker.answered(Instant::now(), self.probe, None).gauge());
        }
    }
}
