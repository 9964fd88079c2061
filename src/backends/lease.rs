//! The lease primitive on one Redis key: `SET key token NX PX ms` to take
//! it, a compare-and-delete to give it back. Shared by the Redis locks, the
//! segment locks and the idempotency claims, which all need "mine until it
//! expires, and only I may delete it".

use std::sync::LazyLock;

use redis::Script;
use redis::aio::ConnectionLike;

use crate::backends::failure::BackendError;

/// Deletes the key only if it still holds our token, so a holder whose
/// lease expired cannot delete the next holder's key.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
    )
});

/// One `SET key token NX PX lease`: true when this call took the key.
pub async fn try_set(
    conn: &mut (impl ConnectionLike + Send),
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

/// Deletes `key` only if it still holds `token`.
pub async fn release_key(
    conn: &mut (impl ConnectionLike + Send),
    key: &str,
    token: &str,
) -> Result<(), BackendError> {
    let _deleted: i64 = RELEASE.key(key).arg(token).invoke_async(conn).await?;
    Ok(())
}
