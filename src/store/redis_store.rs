//! The Redis store: a counter key per product (or per segment), written
//! together with the order's `XADD` by one script.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Script};

use super::Written;
use crate::error::BackendError;
use crate::limit;
use crate::orders::lua_xadd;
use crate::product::{Product, keys};
use crate::strategy::BuyCtx;

/// KEYS: stock, fence-seen. ARGV: fencing token.
/// Records the token as the newest to touch the stock, returns the stock.
static READ_FENCED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') \
         if tonumber(ARGV[1]) > seen then redis.call('SET', KEYS[2], ARGV[1]) end \
         return tonumber(redis.call('GET', KEYS[1]) or '0')",
    )
});

/// KEYS: stock, epoch, orders stream, fence-seen, buyers.
/// ARGV: epoch, new stock, fencing token ('' for none), per-user limit,
/// order fields (the buyer is ARGV[7]).
/// Returns 1 when written, 0 when the product was reset, -1 when fenced,
/// -2 when the buyer reached the limit.
static WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end \
         if ARGV[3] ~= '' and tonumber(ARGV[3]) < tonumber(redis.call('GET', KEYS[4]) or '0') then return -1 end \
         {check} \
         redis.call('SET', KEYS[1], ARGV[2]) \
         {record} \
         {xadd} \
         return 1",
        check = limit::lua_check("KEYS[5]", 4, 7, -2),
        record = limit::lua_record("KEYS[5]", 4, 7),
        xadd = lua_xadd("KEYS[3]", 5)
    ))
});

/// A counter's value (0 when the key is missing).
pub async fn read_key(conn: &mut MultiplexedConnection, key: &str) -> Result<i64, BackendError> {
    let stock: Option<i64> = conn.get(key).await?;
    Ok(stock.unwrap_or(0))
}

/// The product's counter, registering `fence` when given.
pub async fn read(
    conn: &mut MultiplexedConnection,
    product: &Product,
    fence: Option<u64>,
) -> Result<i64, BackendError> {
    let stock = keys::stock(product.id);
    match fence {
        None => read_key(conn, &stock).await,
        Some(token) => Ok(READ_FENCED
            .key(stock)
            .key(keys::fence_seen(product.id))
            .arg(token)
            .invoke_async(conn)
            .await?),
    }
}

/// Writes `new_stock` to `stock_key` and appends the order, atomically.
pub async fn write(
    ctx: &BuyCtx<'_>,
    stock_key: &str,
    new_stock: i64,
    fence: Option<u64>,
) -> Result<Written, BackendError> {
    let id = ctx.product.id;
    let result: i64 = WRITE
        .key(stock_key)
        .key(keys::epoch(id))
        .key(keys::ORDERS)
        .key(keys::fence_seen(id))
        .key(keys::buyers(id))
        .arg(ctx.product.epoch)
        .arg(new_stock)
        .arg(fence.map(|t| t.to_string()).unwrap_or_default())
        .arg(ctx.product.settings.per_user_limit)
        .arg(&ctx.order.stream_args())
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    Ok(match result {
        1 => Written::Sold,
        -1 => Written::Fenced,
        -2 => Written::LimitReached,
        _ => Written::Reset,
    })
}
