//! Locks: acquire, hold a [`Guard`], release. A locked strategy is one of
//! these composed with the shared critical section
//! ([`crate::strategy::locked`]), so locks differ only in how they lock.
//! Each file opens with the recipe it reproduces and its failure mode, and
//! builds its strategy (`pub fn strategy()`).

pub mod db_lock_table;
pub mod fenced;
pub mod local_mutex;
pub mod redis_lock;
pub mod redisson;
pub mod redlock;
pub mod setnx_naive;
pub mod zookeeper;

use std::any::Any;
use std::time::Instant;

use futures::future::BoxFuture;

use crate::error::BackendError;
use crate::strategy::BuyCtx;

/// Proof of holding a lock, handed back to [`Lock::release`].
pub struct Guard {
    /// The owner token written into the lock, so release deletes only our
    /// own lock and never another holder's.
    pub token: String,
    /// The fencing token, for locks that hand one out: the store refuses
    /// writes carrying a token older than the newest it has seen.
    pub fence: Option<u64>,
    /// Whatever the lock must keep alive while held (an owned mutex guard,
    /// a watchdog, a ZooKeeper lock node).
    held: Option<Box<dyn Any + Send>>,
}

impl Guard {
    /// A guard identified by an owner token.
    pub fn with_token(token: String) -> Self {
        Self {
            token,
            fence: None,
            held: None,
        }
    }

    /// Adds what must stay alive until release.
    pub fn holding(mut self, held: impl Any + Send) -> Self {
        self.held = Some(Box::new(held));
        self
    }

    /// Takes back what [`Guard::holding`] stored, if it has type `T`.
    pub fn take_held<T: Any>(&mut self) -> Option<T> {
        let held = self.held.take()?;
        held.downcast::<T>().ok().map(|b| *b)
    }
}

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

/// A mutual-exclusion mechanism for one product's critical section.
pub trait Lock: Send + Sync {
    /// Waits for the lock until `deadline`; `None` when it was not acquired.
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>>;

    /// Releases a lock this buyer holds.
    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>>;

    /// How it waits.
    fn waiting(&self) -> Waiting {
        Waiting::Sliced
    }
}
