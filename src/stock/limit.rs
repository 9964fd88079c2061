//! The per-buyer limit (`per_user_limit`): how many units one buyer may
//! hold of a product.
//!
//! The check and the record are always one atomic step with the stock
//! change: inside the same Lua script for Redis stores (the shared steps
//! of the store's selling scripts), inside the same
//! transaction for PostgreSQL and MySQL. Checking first and recording after the sale
//! is the classic bug: two concurrent requests of one buyer both pass the
//! check, and a refusal that comes after the decrement leaks the unit.
//!
//! One exception, made safe the other way round: `segmented`'s segments
//! live in other cluster slots than the buyer counts, and no script spans
//! two slots. There the unit is claimed at the product's home first
//! ([`claim_at_home`], atomic against the limit) and given back when the
//! sale surely did not happen ([`give_back`]). A crash between the two
//! leaves the buyer one unit short of the limit, never over it.

use std::sync::LazyLock;

use redis::Script;
use sqlx::{MySqlConnection, PgConnection};

use crate::backends::failure::BackendError;
use crate::model::product::keys;
use crate::model::seam::BuyCtx;

/// One more unit for the buyer, unless the upsert's `WHERE` finds the
/// limit reached (then no row is touched).
const CLAIM_SQL: &str = "INSERT INTO buyer_counts (product_id, epoch, user_id, bought) \
     VALUES ($1, $2, $3, 1) \
     ON CONFLICT (product_id, epoch, user_id) \
     DO UPDATE SET bought = buyer_counts.bought + 1 WHERE buyer_counts.bought < $4";

/// Inside the caller's transaction: counts the unit for the buyer and
/// returns whether the limit allowed it. Always true without a limit (and
/// then costs nothing). On false the caller must roll back.
pub async fn claim_pg(conn: &mut PgConnection, ctx: &BuyCtx<'_>) -> Result<bool, BackendError> {
    let limit = ctx.product.settings.per_user_limit;
    if limit == 0 {
        return Ok(true);
    }
    let claimed = sqlx::query(CLAIM_SQL)
        .bind(ctx.product.id)
        .bind(ctx.product.epoch)
        .bind(&ctx.order.user_id)
        .bind(i32::try_from(limit).unwrap_or(i32::MAX))
        .execute(conn)
        .await?
        .rows_affected();
    Ok(claimed == 1)
}

/// Inside the caller's MySQL transaction: [`claim_pg`] for a product
/// stored in MySQL. MySQL's upsert cannot leave a row unchanged and say so
/// (sqlx counts found rows, so "inserted" and "left as it was" both
/// answer 1), so it counts the unit and reads the count back: above the
/// limit, the caller's rollback takes the unit back. The upsert's row
/// lock holds the buyer's other requests until then.
pub async fn claim_mysql(
    conn: &mut MySqlConnection,
    ctx: &BuyCtx<'_>,
) -> Result<bool, BackendError> {
    let limit = ctx.product.settings.per_user_limit;
    if limit == 0 {
        return Ok(true);
    }
    let (product, epoch, user) = (ctx.product.id, ctx.product.epoch, &ctx.order.user_id);
    sqlx::query(
        "INSERT INTO buyer_counts (product_id, epoch, user_id, bought) VALUES (?, ?, ?, 1) \
         ON DUPLICATE KEY UPDATE bought = bought + 1",
    )
    .bind(product)
    .bind(epoch)
    .bind(user)
    .execute(&mut *conn)
    .await?;
    let bought: i32 = sqlx::query_scalar(
        "SELECT bought FROM buyer_counts WHERE product_id = ? AND epoch = ? AND user_id = ?",
    )
    .bind(product)
    .bind(epoch)
    .bind(user)
    .fetch_one(&mut *conn)
    .await?;
    Ok(i64::from(bought) <= i64::from(limit))
}

/// KEYS: buyer counts. ARGV: buyer, limit. One more unit for the buyer
/// unless at the limit: 1 when claimed, 0 when not.
static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') >= tonumber(ARGV[2]) \
         then return 0 end \
         redis.call('HINCRBY', KEYS[1], ARGV[1], 1) return 1",
    )
});

/// Claims one unit for the buyer in the product's Redis buyer counts,
/// unless the limit is reached (false). Always true without a limit.
pub async fn claim_at_home(ctx: &BuyCtx<'_>) -> Result<bool, BackendError> {
    let limit = ctx.product.settings.per_user_limit;
    if limit == 0 {
        return Ok(true);
    }
    let claimed: i64 = CLAIM
        .key(keys::buyers(ctx.product.id))
        .arg(&ctx.order.user_id)
        .arg(limit)
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    Ok(claimed == 1)
}

/// KEYS: buyer counts. ARGV: buyer. One unit less for the buyer; a count
/// back at 0 leaves no field (on a sold-out `segmented` product every
/// try is a claim and a give-back: a field each would keep every buyer
/// who ever tried).
static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -1) \
         if left <= 0 then redis.call('HDEL', KEYS[1], ARGV[1]) end \
         return left",
    )
});

/// Returns a unit claimed by [`claim_at_home`] whose sale surely did not
/// happen. Best effort: if Redis does not take it back, the buyer stays
/// one unit short of the limit.
pub async fn give_back(ctx: &BuyCtx<'_>) {
    if ctx.product.settings.per_user_limit == 0 {
        return;
    }
    let returned: Result<i64, _> = GIVE_BACK
        .key(keys::buyers(ctx.product.id))
        .arg(&ctx.order.user_id)
        .invoke_async(&mut ctx.redis.clone())
        .await;
    if let Err(error) = returned {
        tracing::warn!(%error, product = ctx.product.id, "a claimed unit was not given back");
    }
}

/// A hint, read before queueing for a lock: whether the buyer already
/// holds `per_user_limit` units. A buyer at the limit is refused at once
/// instead of taking its turn in the critical section only to be refused
/// there. Never the decision: a buyer under the limit here may still be
/// refused by the atomic step (its own concurrent request got there
/// first).
pub async fn already_reached(ctx: &BuyCtx<'_>) -> Result<bool, BackendError> {
    let limit = ctx.product.settings.per_user_limit;
    if limit == 0 {
        return Ok(false);
    }
    Ok(ctx.store.bought(ctx).await? >= i64::from(limit))
}
