//! `redis-lock`: `SET key token NX PX ttl`, released by a Lua
//! compare-and-delete, acquired with bounded retry and jittered backoff —
//! the articles' "correct" single-Redis lock.
//!
//! Known failure: the lease. When the holder's work outlives `lease_ms` the
//! key expires, a second buyer takes the lock while the first is still in
//! the section, and both sell from the same stock reading.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use futures::FutureExt;
use futures::future::BoxFuture;
use redis::Script;
use redis::aio::MultiplexedConnection;
use uuid::Uuid;

use super::{Guard, Lock};
use crate::backoff;
use crate::error::BackendError;
use crate::product::keys;
use crate::store::StoreKind;
use crate::strategy::locked::Locked;
use crate::strategy::{BuyCtx, Info, Strategy};

/// The `redis-lock` strategy.
pub fn strategy() -> Arc<dyn Strategy> {
    Locked::strategy(
        Info {
            id: "redis-lock",
            backend: "redis",
            store: StoreKind::Redis,
            mechanism: "SET key uuid NX PX ttl; Lua compare-and-delete release; bounded retry with backoff",
            safe: true,
            safe_against: "many instances; a holder that finishes within its lease",
            unsafe_against: "work that outlives lease_ms (the lock expires under the holder)",
        },
        RedisLock,
    )
}

/// Deletes the lock only if it still holds our token, so a holder whose
/// lease expired cannot delete the next holder's lock.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// The lease-based Redis lock.
pub struct RedisLock;

/// One `SET key token NX PX lease`: true when this call took the lock.
pub async fn try_set(
    conn: &mut MultiplexedConnection,
    key: &str,
    token: &str,
    lease_ms: u64,
) -> Result<bool, BackendError> {
    let set: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(token)
        .arg("NX")
        .arg("PX")
        .arg(lease_ms)
        .query_async(conn)
        .await?;
    Ok(set.is_some())
}

/// Retries [`try_set`] until `deadline`, backing off by how long the buy
/// has waited (up to 16 ms).
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

/// Deletes `key` only if it still holds `token`.
pub async fn release_key(
    conn: &mut MultiplexedConnection,
    key: &str,
    token: &str,
) -> Result<(), BackendError> {
    let _deleted: i64 = RELEASE.key(key).arg(token).invoke_async(conn).await?;
    Ok(())
}

impl Lock for RedisLock {
    fn acquire<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        deadline: Instant,
    ) -> BoxFuture<'a, Result<Option<Guard>, BackendError>> {
        async move {
            let token = Uuid::new_v4().to_string();
            let key = keys::lock(ctx.product.id);
            let held = spin(ctx, &key, &token, deadline).await?;
            Ok(held.then(|| Guard::with_token(token)))
        }
        .boxed()
    }

    fn release<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        guard: Guard,
    ) -> BoxFuture<'a, Result<(), BackendError>> {
        async move {
            release_key(
                &mut ctx.redis.clone(),
                &keys::lock(ctx.product.id),
                &guard.token,
            )
            .await
        }
        .boxed()
    }
}
