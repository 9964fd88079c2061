//! `redis-lock`: `SET key token NX PX ttl`, released by a Lua
//! compare-and-delete, acquired with bounded retry and jittered backoff —
//! the articles' "correct" single-Redis lock.
//!
//! Known failure: the lease. When the holder's work outlives `lease_ms` the
//! key expires, a second buyer takes the lock while the first is still in
//! the section, and both sell from the same stock reading.

use std::time::Instant;

use uuid::Uuid;

use super::{Acquired, Lock, Token};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::backends::lease::{release_key, try_set};
use crate::model::backoff;
use crate::model::product::{Product, keys};
use crate::model::seam::BuyCtx;

/// The lease-based Redis lock.
pub struct RedisLock;

/// Retries [`try_set`] on `key` until `deadline`, backing off by how long
/// the buy has waited (up to 16 ms).
pub async fn spin(
    ctx: &BuyCtx<'_>,
    key: &str,
    token: &str,
    deadline: Instant,
) -> Result<bool, BackendError> {
    let mut conn = ctx.redis.clone();
    let lease_ms = ctx.product.settings.lease_ms;
    loop {
        if try_set(&mut conn, key, token, lease_ms).await? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(backoff::delay_since(ctx.started, 16, deadline)).await;
    }
}

impl Lock for RedisLock {
    type Guard = Token;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Token> {
        let token = Uuid::new_v4().to_string();
        let held = spin(ctx, &keys::lock(ctx.product.id), &token, deadline).await?;
        Ok(held.then_some(Token(token)))
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: Token) -> Result<(), BackendError> {
        release_key(
            &mut ctx.redis.clone(),
            &keys::lock(ctx.product.id),
            &guard.0,
        )
        .await
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint::redis([keys::lock(product.id)])
    }
}
