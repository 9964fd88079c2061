//! `naive`: GET, check, SET with no lock at all — the articles' starting
//! point (`stringRedisTemplate.opsForValue().get("stock")` … `set(stock - 1)`).
//!
//! Known failure: any two concurrent buyers can read the same stock and
//! both sell, so it oversells under any concurrency.

use super::{Strategy, section};
use crate::backends::failure::BackendError;
use crate::model::info::{self, Info};
use crate::model::seam::{BuyCtx, Outcome};

/// No lock: the shared critical section, unguarded.
pub struct Naive;

impl Strategy for Naive {
    fn info(&self) -> &'static Info {
        info::entry("naive")
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        section::run(ctx, 0, None).await
    }
}
