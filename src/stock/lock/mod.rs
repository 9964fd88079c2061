//! Locks: acquire, hold a guard, release. A locked strategy is one of these
//! composed with the shared critical section
//! (`strategy::locked::Locked`, a layer up), so locks differ only in how they
//! lock. Each file opens with the recipe it reproduces and its failure
//! mode, and describes the strategy it makes (`pub const INFO`); the
//! catalogue puts the two together.
//!
//! Static dispatch: `Locked<L: Lock>` is generic, so the trait uses native
//! `async fn` and each lock names its own guard type — no boxing, no
//! downcasting what a guard keeps alive.

pub mod curator;
pub mod db_lock_table;
pub mod etcd;
pub mod fenced;
pub mod local_mutex;
pub mod redis_lock;
pub mod redisson;
pub mod redlock;
pub mod setnx_naive;
pub mod zookeeper;

use std::future::Future;
use std::time::Instant;

use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::product::Product;
use crate::model::seam::BuyCtx;

/// How a lock waits, which decides how the caller slices the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Spins or waits in short slices; between slices the caller re-checks
    /// whether there is still stock to wait for.
    Sliced,
    /// Waits in a fair queue (ZooKeeper): leaving and re-joining would lose
    /// the place, so it waits up to the whole deadline at once.
    Queued,
    /// Tries once and gives up (the articles' `setnx` that answers "busy").
    FailFast,
}

/// What an acquire ends with: the guard, `None` when the lock was not
/// acquired by the deadline, or the backend's failure.
pub type Acquired<G> = Result<Option<G>, BackendError>;

/// A mutual-exclusion mechanism for one product's critical section.
pub trait Lock: Send + Sync {
    /// Proof of holding the lock, and whatever must stay alive while it is
    /// held (an owned mutex guard, a watchdog, a ZooKeeper lock node).
    type Guard: Send;

    /// Waits for the lock until `deadline`; `None` when it was not acquired.
    fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        deadline: Instant,
    ) -> impl Future<Output = Acquired<Self::Guard>> + Send;

    /// Releases a lock this buyer holds.
    fn release(
        &self,
        ctx: &BuyCtx<'_>,
        guard: Self::Guard,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// The fencing token the guard carries, for locks that hand one out:
    /// the store refuses writes carrying a token older than the newest it
    /// has seen.
    fn fence(_guard: &Self::Guard) -> Option<u64> {
        None
    }

    /// Takes the read side of the lock for a stock query, for the locks
    /// that have one (a read/write lock).
    fn read(
        &self,
        _backends: &Backends,
        _product: &Product,
        _deadline: Instant,
    ) -> impl Future<Output = Result<Reading, BackendError>> + Send {
        async { Ok(Reading::Unlocked) }
    }

    /// How it waits.
    fn waiting(&self) -> Waiting {
        Waiting::Sliced
    }

    /// What the lock leaves behind per product (keys, rows, nodes), which a
    /// reset clears.
    fn footprint(&self, _product: &Product) -> Footprint {
        Footprint::default()
    }
}

/// What a stock query got of a lock's read side.
pub enum Reading {
    /// The lock has no read side: queries read without it.
    Unlocked,
    /// Held until this is dropped.
    Held(Box<dyn Send + Sync>),
    /// Not acquired before the deadline (writers held it).
    TimedOut,
}

/// A guard that is only an owner token (the value written into the lock),
/// for the locks that need nothing else to release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token(pub String);
