//! The Redis stock store used by the locked strategies: read the counter,
//! then write the new value and append the order in one atomic script.
//!
//! The read and the write are separate on purpose: between them lies the
//! critical section that a lock must protect. Without a (working) lock two
//! buyers read the same value and both write `value - 1`: a lost update,
//! and one more order than the stock allowed.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Script};

use crate::error::BackendError;
use crate::orders::lua_xadd;
use crate::product::keys;
use crate::strategy::BuyCtx;

/// KEYS: stock, epoch, orders stream. ARGV: epoch, new stock, order fields.
/// Refuses (returns 0) when the product was reset since the buy began.
static WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end \
         redis.call('SET', KEYS[1], ARGV[2]) \
         {xadd} \
         return 1",
        xadd = lua_xadd("KEYS[3]", 3)
    ))
});

/// The current stock counter (0 when the key is missing).
pub async fn read(conn: &mut MultiplexedConnection, product_id: i64) -> Result<i64, BackendError> {
    let stock: Option<i64> = conn.get(keys::stock(product_id)).await?;
    Ok(stock.unwrap_or(0))
}

/// Writes `new_stock` and appends the order atomically. `false` means the
/// product was reset meanwhile and nothing was written.
pub async fn write(
    conn: &mut MultiplexedConnection,
    ctx: &BuyCtx<'_>,
    new_stock: i64,
) -> Result<bool, BackendError> {
    let id = ctx.product.id;
    let written: i64 = WRITE
        .key(keys::stock(id))
        .key(keys::epoch(id))
        .key(keys::ORDERS)
        .arg(ctx.product.epoch)
        .arg(new_stock)
        .arg(&ctx.order.stream_args())
        .invoke_async(conn)
        .await?;
    Ok(written == 1)
}
