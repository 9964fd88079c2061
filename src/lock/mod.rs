//! Locks: acquire, hold a [`Guard`], release. A locked strategy is one of
//! these composed with the shared critical section
//! ([`crate::strategy::locked`]), so locks differ only in how they lock.

pub mod local_mutex;
pub mod redis_lock;

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
    /// Whatever the lock must keep alive while held (an owned mutex guard).
    _held: Option<Box<dyn Any + Send>>,
}

impl Guard {
    /// A guard identified by an owner token.
    pub fn with_token(token: String) -> Self {
        Self { token, _held: None }
    }

    /// A guard that keeps `held` alive until it is released.
    pub fn holding(held: impl Any + Send) -> Self {
        Self {
            token: String::new(),
            _held: Some(Box::new(held)),
        }
    }
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
}
