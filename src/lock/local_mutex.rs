//! `local-mutex`: an in-process mutex per product — Java's `synchronized`
//! around the critical section, as in the articles' first "fix".
//!
//! Known failure: the mutex lives in one process. With two instances behind
//! nginx each has its own, so two buyers (one per instance) are in the
//! section at once and the product oversells.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{Guard, Lock};
use crate::error::BackendError;
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `local-mutex` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "local-mutex",
            backend: "redis",
            store: StoreKind::Redis,
            mechanism: "in-process mutex per product (\"synchronized\") around GET, check, SET",
            safe: false,
            safe_against: "concurrent buyers on one instance",
            unsafe_against: "more than one instance: each has its own mutex",
        },
        LocalMutex::default(),
    )
}

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
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
            let mutex = self.mutex(ctx.product.id);
            let locked = tokio::time::timeout_at(deadline.into(), mutex.lock_owned()).await;
            Ok(locked
                .ok()
                .map(|held| Guard::with_token(String::new()).holding(held)))
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        _ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        drop(guard);
        futures::future::ready(Ok(())).boxed()
    }
}
