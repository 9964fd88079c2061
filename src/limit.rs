//! The per-buyer limit (`per_user_limit`): how many units one buyer may
//! hold of a product.
//!
//! The check and the record are always one atomic step with the stock
//! change: inside the same Lua script for Redis stores (the shared steps
//! of the store's selling scripts), inside the same
//! transaction for PostgreSQL. Checking first and recording after the sale
//! is the classic bug: two concurrent requests of one buyer both pass the
//! check, and a refusal that comes after the decrement leaks the unit.

use redis::AsyncCommands;
use sqlx::PgConnection;

use crate::error::BackendError;
use crate::product::{StoreKind, keys};
use crate::sale::BuyCtx;

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

/// A hint, read before queueing for a lock: whether the buyer already
/// holds `per_user_limit` units. A buyer at the limit is refused at once
/// instead of taking its turn in the critical section only to be refused
/// there. Never the decision: a buyer under the limit here may still be
/// refused by the atomic step (its own concurrent request got there
/// first).
pub async fn already_reached(ctx: &BuyCtx<'_>, kind: StoreKind) -> Result<bool, BackendError> {
    let limit = ctx.product.settings.per_user_limit;
    if limit == 0 {
        return Ok(false);
    }
    let held: Option<i64> = match kind {
        StoreKind::Redis => {
            ctx.redis
                .clone()
                .hget(keys::buyers(ctx.product.id), &ctx.order.user_id)
                .await?
        }
        StoreKind::Postgres => {
            sqlx::query_scalar(
                "SELECT bought::bigint FROM buyer_counts \
             WHERE product_id = $1 AND epoch = $2 AND user_id = $3",
            )
            .bind(ctx.product.id)
            .bind(ctx.product.epoch)
            .bind(&ctx.order.user_id)
            .fetch_optional(&ctx.backends.pg)
            .await?
        }
    };
    Ok(held.unwrap_or(0) >= i64::from(limit))
}
