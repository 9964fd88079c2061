//! `local-mutex`: an in-process mutex per product — Java's `synchronized`
//! around the critical section, as in the articles' first "fix".
//!
//! Known failure: the mutex lives in one process. With two instances behind
//! nginx each has its own, so two buyers (one per instance) are in the
//! section at once and the product oversells.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::OwnedMutexGuard;

use super::{Acquired, Lock};
use crate::backends::failure::BackendError;
use crate::model::seam::BuyCtx;

/// One async mutex per product id.
#[derive(Default)]
pub struct LocalMutex {
    /// A std mutex guards the map: it is held only to look up or insert an
    /// entry, never across an await, so it cannot block the runtime.
    by_product: Mutex<HashMap<i64, Arc<tokio::sync::Mutex<()>>>>,
}

impl LocalMutex {
    fn mutex(&self, id: i64) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self
            .by_product
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        map.entry(id).or_default().clone()
    }
}

impl Lock for LocalMutex {
    /// Dropping the owned guard is the release.
    type Guard = OwnedMutexGuard<()>;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Self::Guard> {
        let mutex = self.mutex(ctx.product.id);
        Ok(tokio::time::timeout_at(deadline.into(), mutex.lock_owned())
            .await
            .ok())
    }

    async fn release(&self, _ctx: &BuyCtx<'_>, guard: Self::Guard) -> Result<(), BackendError> {
        drop(guard);
        Ok(())
    }
}
