//! The sale itself, mostly in a task of its own: the strategy sells, and the
//! idempotency claim is settled — the answer recorded after a sale, the
//! claim withdrawn after a refusal, kept after an unknown outcome.
//!
//! Its own task because a client that hangs up (or the request timeout)
//! must not cut a sale off between the stock write and the idempotency
//! answer, or a lock between acquire and release; a one-step sale with no
//! key to settle has neither, and runs in its request's task.

use std::sync::Arc;
use std::time::Duration;

use super::{Sale, Shop};
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::model::error::ApiError;
use crate::model::product::{Product, keys};
use crate::model::seam::{BuyCtx, Outcome};
use crate::sale::idempotency::Sold;

/// How long an unknown outcome's count is kept: a day of looking back.
const UNKNOWN_COUNT_TTL_SECS: u64 = 86_400;

/// Runs the product's strategy for `order` and settles `claim`. A
/// sell-out seen here sets the instance's sold-out flag.
pub async fn sell(shop: Arc<Shop>, sale: Sale) -> Result<Sold, ApiError> {
    let (listed, lane, order, claim) = (sale.listed, sale.lane, sale.order, sale.claim);
    let started = sale.started;
    let mut redis = lane.conn.clone();
    let product = &listed.product;
    let ctx = BuyCtx {
        started,
        redis: redis.clone(),
        product,
        store: listed.store.as_ref(),
        order: &order,
        backends: &shop.backends,
    };
    let flags_seen = shop.memory.sold_out.seen();
    let outcome = lane.checked(listed.strategy.buy(&ctx).await);
    if let Some(permit) = sale.permit {
        permit.answered(outcome.is_err());
    }
    let label = outcome.as_ref().map_or("error", Outcome::label);
    listed.metrics.record(label, started.elapsed());
    tracing::debug!(outcome = label, "buy done");
    let refused = match outcome {
        Ok(Outcome::Sold { left }) => {
            // With waves the counter holds only what is on sale so far:
            // its count is not the buyer's unit of the stock.
            let sold = Sold::of(product, order, left.filter(|_| product.settings.waves <= 1));
            // The order stands either way; without the answer the key
            // stays pending (retries are told `busy`, never sold twice).
            if let Some(claim) = &claim
                && let Err(error) = claim.record(&mut redis, &sold).await
            {
                tracing::error!(%error, product = product.id, "idempotency answer not recorded");
            }
            return Ok(sold);
        }
        Ok(Outcome::SoldOut) => sold_out(&shop, product, flags_seen),
        Ok(Outcome::LimitReached) => ApiError::LimitReached,
        Ok(Outcome::Reset) => ApiError::busy("the product was reset during the buy"),
        Ok(Outcome::Fenced) => ApiError::busy("fenced: a newer lock holder has touched the stock"),
        Ok(Outcome::Busy {
            reason,
            retry_after,
        }) => ApiError::Busy {
            message: reason.to_owned(),
            retry_after,
        },
        Err(BackendError::OutcomeUnknown(cause)) => {
            count_unknown(&mut redis, product).await;
            // The claim stays: a retry with this key must not buy again
            // before anyone knows whether this one did.
            return Err(ApiError::OutcomeUnknown {
                order_id: Some(order.order_id),
                cause,
            });
        }
        Err(error) => ApiError::Backend(error),
    };
    if let Some(claim) = &claim
        && let Err(error) = claim.withdraw(&mut redis).await
    {
        tracing::warn!(%error, product = product.id, "idempotency claim not withdrawn");
    }
    Err(refused)
}

/// Sold out: until the next wave, if one is still to come (no flag: come
/// back then); for good otherwise, remembered by the instance unless a
/// flag was cleared since `flags_seen` (units went back meanwhile).
fn sold_out(shop: &Shop, product: &Product, flags_seen: u64) -> ApiError {
    let now = shop.backends.clock.now_ms();
    let settings = &product.settings;
    let due = settings.waves_due(now);
    if due < settings.waves {
        let next_at_ms = settings.wave_opens_at(due + 1);
        return ApiError::SoldOutUntil {
            next_in: Duration::from_millis(next_at_ms.saturating_sub(now)),
            next_at_ms,
        };
    }
    shop.memory
        .sold_out
        .mark(product.id, product.epoch, flags_seen);
    ApiError::SoldOut
}

/// Counts an `outcome_unknown` answer in the product's ledger. Best
/// effort, briefly: the backend that failed may be this very Redis.
async fn count_unknown(redis: &mut RedisConn, product: &Product) {
    let key = keys::unknown(product.id, product.epoch);
    let mut pipe = redis::pipe();
    pipe.incr(&key, 1)
        .ignore()
        .expire(&key, UNKNOWN_COUNT_TTL_SECS as i64)
        .ignore();
    let counted = pipe.query_async::<()>(redis);
    match tokio::time::timeout(Duration::from_millis(200), counted).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "unknown outcome not counted"),
        Err(_) => tracing::warn!("unknown outcome not counted: redis did not answer"),
    }
}
