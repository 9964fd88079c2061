//! `redis-lock`: `SET key token NX PX ttl`, released by a Lua
//! compare-and-delete, acquired with bounded retry and jittered backoff —
//! the articles' "correct" single-Redis lock.
//!
//! Known failure: the lease. When the holder's work outlives `lease_ms` the
//! key expires, a second buyer takes the lock while the first is still in
//! the section, and both sell from the same stock reading.

use std::sync::LazyLock;
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::Script;
use uuid::Uuid;

use super::{Guard, Lock};
use crate::backoff;
use crate::error::BackendError;
use crate::product::keys;
use crate::strategy::BuyCtx;

/// Deletes the lock only if it still holds our token, so a holder whose
/// lease expired cannot delete the next holder's lock.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// The lease-based Redis lock.
pub struct RedisLock;

impl Lock for RedisLock {
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
            let key = keys::lock(ctx.product.id);
            let token = Uuid::new_v4().to_string();
            let lease = ctx.product.settings.lease_ms;
            for attempt in 0.. {
                let acquired: Option<String> = {
                    let mut conn = ctx.redis.clone();
                    redis::cmd("SET")
                        .arg(&key)
                        .arg(&token)
                        .arg("NX")
                        .arg("PX")
                        .arg(lease)
                        .query_async(&mut conn)
                        .await?
                };
                if acquired.is_some() {
                    return Ok(Some(Guard::with_token(token)));
                }
                if Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(backoff::delay(attempt, deadline)).await;
            }
            Ok(None)
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            let mut conn = ctx.redis.clone();
            let _deleted: i64 = RELEASE
                .key(keys::lock(ctx.product.id))
                .arg(&guard.token)
                .invoke_async(&mut conn)
                .await?;
            Ok(())
        }
        .boxed()
    }
}
