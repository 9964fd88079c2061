//! `naive`: GET, check, SET with no lock at all — the articles' starting
//! point (`stringRedisTemplate.opsForValue().get("stock")` … `set(stock - 1)`).
//!
//! Known failure: any two concurrent buyers can read the same stock and
//! both sell, so it oversells under any concurrency.

use super::{Outcome, Strategy, section};
use crate::backends::failure::BackendError;
use crate::model::info::{ANY_STORE, Expect, Hazard, Info};
use crate::model::product::StoreKind;
use crate::model::seam::BuyCtx;

/// No lock: the shared critical section, unguarded.
pub struct Naive;

const INFO: Info = Info {
    id: "naive",
    backend: "redis",
    store: StoreKind::Redis,
    stores: ANY_STORE,
    mechanism: "GET, check, SET on a Redis counter with no lock",
    safe: false,
    safe_against: "nothing; correct only with one buyer at a time",
    unsafe_against: "any concurrency: concurrent buyers read the same stock and all sell",
    under: &[(Hazard::Contention, Expect::Oversells)],
    recipes: &[],
};

impl Strategy for Naive {
    fn info(&self) -> &Info {
        &INFO
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        section::run(ctx, 0, None).await
    }
}
