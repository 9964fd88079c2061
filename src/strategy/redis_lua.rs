//! `redis-lua`: check, DECR and XADD of the order in one Lua script — the
//! articles' lock-free answer. Redis runs a script alone, so there is no
//! window between the check and the write.
//!
//! The per-user limit is checked and counted inside the same script.
//!
//! Known failure: none for the counter itself; `work_ms` has no place here
//! (a script must not sleep), which is exactly why it is the fastest.

use std::sync::LazyLock;

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::Script;

use super::{BuyCtx, Info, Outcome, Strategy};
use crate::error::BackendError;
use crate::limit;
use crate::orders::lua_xadd;
use crate::product::keys;
use crate::store::StoreKind;

/// KEYS: stock, epoch, orders stream, buyers.
/// ARGV: epoch, per-user limit, order fields (the buyer is ARGV[5]).
/// Returns the new stock, -1 when sold out, -2 when the product was reset,
/// -3 when the buyer reached the limit.
static BUY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -2 end \
         local stock = tonumber(redis.call('GET', KEYS[1]) or '0') \
         if stock <= 0 then return -1 end \
         {check} \
         redis.call('DECR', KEYS[1]) \
         {record} \
         {xadd} \
         return stock - 1",
        check = limit::lua_check("KEYS[4]", 2, 5, -3),
        record = limit::lua_record("KEYS[4]", 2, 5),
        xadd = lua_xadd("KEYS[3]", 3)
    ))
});

/// The atomic Lua strategy.
pub struct RedisLua;

static INFO: Info = Info {
    id: "redis-lua",
    backend: "redis",
    store: StoreKind::Redis,
    mechanism: "one Lua script: check stock, DECR, XADD the order",
    safe: true,
    safe_against: "any concurrency, any number of instances, slow or crashed clients",
    unsafe_against: "losing Redis itself without persistence (orders not yet in PostgreSQL)",
};

impl RedisLua {
    async fn buy_atomic(&self, ctx: &BuyCtx<'_>) -> Result<Outcome, BackendError> {
        let id = ctx.product.id;
        let mut conn = ctx.redis.clone();
        let result: i64 = BUY
            .key(keys::stock(id))
            .key(keys::epoch(id))
            .key(keys::ORDERS)
            .key(keys::buyers(id))
            .arg(ctx.product.epoch)
            .arg(ctx.product.settings.per_user_limit)
            .arg(&ctx.order.stream_args())
            .invoke_async(&mut conn)
            .await?;
        Ok(match result {
            -1 => Outcome::SoldOut,
            -2 => Outcome::busy("the product was reset during the buy"),
            -3 => Outcome::LimitReached,
            _ => Outcome::Sold,
        })
    }
}

impl Strategy for RedisLua {
    fn info(&self) -> &Info {
        &INFO
    }

    fn buy<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> BoxFuture<'a, Result<Outcome, BackendError>> {
        self.buy_atomic(ctx).boxed()
    }
}
