//! `redis-lua`: check, DECR and XADD of the order in one Lua script — the
//! articles' lock-free answer. Redis runs a script alone, so there is no
//! window between the check and the write.
//!
//! The per-user limit is checked and counted inside the same script.
//!
//! Known failure: losing its own writes — Redis without persistence that
//! crashes, or a failover to a replica that had not received the last
//! decrements (the unit sells again). `work_ms` has no place here (a
//! script must not sleep), which is exactly why it is the fastest.

use std::sync::LazyLock;

use redis::Script;

use super::Strategy;
use crate::backends::failure::BackendError;
use crate::model::info::{self, Info};
use crate::model::product::keys::RedisCell;
use crate::model::seam::{BuyCtx, Outcome};
use crate::stock::store::script;

/// Check the reset, the stock and the buyer's limit, then decrement and
/// record the order: all or nothing.
static BUY: LazyLock<Script> = LazyLock::new(|| {
    script::selling(
        "{check_epoch} \
         if tonumber(redis.call('GET', stock_key) or '0') <= 0 then return {sold_out} end \
         {check_limit} \
         local left = redis.call('DECR', stock_key) \
         {record} \
         return {sold}",
    )
});

/// The atomic Lua strategy.
pub struct RedisLua;

impl Strategy for RedisLua {
    fn info(&self) -> &'static Info {
        info::entry("redis-lua")
    }

    /// One script: Redis has run it whole or not at all.
    fn one_step(&self) -> bool {
        true
    }

    async fn buy(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let cell = RedisCell::home(ctx.product);
        script::run(&BUY, ctx, &cell, None, None).await
    }
}
