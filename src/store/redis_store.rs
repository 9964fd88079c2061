//! The Redis store: a counter key per product (or per segment), written
//! together with the order's `XADD` by one script.

use std::sync::LazyLock;

use redis::{AsyncCommands, Script};

use super::RedisCell;
use super::script::{self, Written};
use crate::error::BackendError;
use crate::sale::BuyCtx;

/// KEYS: stock, fence-seen. ARGV: fencing token.
/// Records the token as the newest to touch the stock, returns the stock.
static READ_FENCED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local stock_key, fence_key, fence = KEYS[1], KEYS[2], tonumber(ARGV[1]) \
         local seen = tonumber(redis.call('GET', fence_key) or '0') \
         if fence > seen then redis.call('SET', fence_key, fence) end \
         return tonumber(redis.call('GET', stock_key) or '0')",
    )
});

/// Writes the new stock unless the product was reset, a newer fencing
/// token has read the stock, or the buyer is at the limit.
static WRITE: LazyLock<Script> = LazyLock::new(|| {
    script::selling(
        "{check_epoch} \
         if fence ~= '' and tonumber(fence) < tonumber(redis.call('GET', fence_key) or '0') \
         then return {fenced} end \
         {check_limit} \
         redis.call('SET', stock_key, new_stock) \
         {record} \
         return {sold}",
    )
});

/// The counter (0 when missing), registering `fence` when given.
pub async fn read(
    ctx: &BuyCtx<'_>,
    cell: &RedisCell,
    fence: Option<u64>,
) -> Result<i64, BackendError> {
    let mut conn = ctx.redis.clone();
    match fence {
        None => {
            let stock: Option<i64> = conn.get(&cell.key).await?;
            Ok(stock.unwrap_or(0))
        }
        Some(token) => Ok(READ_FENCED
            .key(&cell.key)
            .key(cell.place.fence_seen())
            .arg(token)
            .invoke_async(&mut conn)
            .await?),
    }
}

/// Writes `new_stock` to the counter and appends the order, atomically.
pub async fn write(
    ctx: &BuyCtx<'_>,
    cell: &RedisCell,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    script::run(&WRITE, ctx, cell, Some(new_stock), fence).await
}
