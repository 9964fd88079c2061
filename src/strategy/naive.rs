//! `naive`: GET, check, SET with no lock at all — the articles' starting
//! point (`stringRedisTemplate.opsForValue().get("stock")` … `set(stock - 1)`).
//!
//! Known failure: any two concurrent buyers can read the same stock and
//! both sell, so it oversells under any concurrency.

use futures::FutureExt;
use futures::future::BoxFuture;

use super::{BuyCtx, Info, Outcome, Strategy, section};
use crate::error::BackendError;
use crate::store::StoreKind;

/// No lock: the shared critical section, unguarded.
pub struct Naive;

static INFO: Info = Info {
    id: "naive",
    backend: "redis",
    store: StoreKind::Redis,
    mechanism: "GET, check, SET on a Redis counter with no lock",
    safe: false,
    safe_against: "nothing; correct only with one buyer at a time",
    unsafe_against: "any concurrency: concurrent buyers read the same stock and all sell",
};

impl Strategy for Naive {
    fn info(&self) -> &Info {
        &INFO
    }

    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>> {
        section::run(ctx, super::store_of(&INFO, ctx.product), None).boxed()
    }
}
