//! `etcd`: etcd's own lock (the v3 `Lock` service, the server side of
//! `clientv3/concurrency.Mutex`) on a lease of the buyer's, kept alive by a
//! watchdog while it is held.
//!
//! Each buyer grants itself a lease (`lease_ms`, rounded up to whole
//! seconds: etcd's TTLs are seconds) and asks for the lock with it. The
//! server writes `seckill/locks/<id>/<lease>` and answers once every key
//! with an older create revision under the prefix is gone: a fair queue,
//! each waiter watching its predecessor, as ZooKeeper's recipe does.
//! The buyer's watchdog renews the lease every third of its TTL from the
//! grant on, through the wait and the hold. After the answer the buyer
//! reads its key back: etcd 3.4 answers "locked" to a waiter whose lease
//! ran out in the queue (3.5 checks this on the server). Revoking the
//! lease releases the lock (its key goes with it): one round trip. Four
//! round trips a sale, and a keep-alive stream per waiter past a third of
//! its TTL.
//!
//! A lease per buyer, not one per instance as `concurrency.Session`
//! keeps: the lock's key is named after the lease, so two buyers on one
//! lease would both "hold" it.
//!
//! Known failure (Jepsen, etcd 3.4.3): the lock is only a lease. A holder
//! frozen (or cut off from etcd) past its TTL stops renewing, the lease
//! expires, the next waiter gets the lock, and the holder wakes up and
//! writes anyway: etcd's lock hands out no token the stock could check. A
//! crashed holder is harmless: its lease runs out and the queue moves on.

use std::time::{Duration, Instant};

use etcd_client::{Client, LockOptions};

use super::{Acquired, Lock, Waiting};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::product::Product;
use crate::model::seam::BuyCtx;

/// How long a grant or a revoke may take before the call counts as
/// failed: a live etcd on loopback answers in a millisecond.
const CALL_TIMEOUT: Duration = Duration::from_millis(1000);

/// The lock's name: the prefix its holders' keys live under.
fn lock_name(product_id: i64) -> String {
    format!("seckill/locks/{product_id}")
}

/// A lease's TTL in etcd's whole seconds, at least `lease_ms`.
fn ttl_seconds(lease_ms: u64) -> i64 {
    lease_ms.div_ceil(1000).max(1) as i64
}

/// The etcd lock.
pub struct EtcdLock;

/// A held lock: the lease its key hangs on, and the watchdog renewing it
/// (stopped when the guard is dropped).
pub struct Held {
    lease: i64,
    watchdog: tokio::task::JoinHandle<()>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.watchdog.abort();
    }
}

impl Lock for EtcdLock {
    type Guard = Held;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Self::Guard> {
        let mut client = client(ctx)?;
        let ttl = ttl_seconds(ctx.product.settings.lease_ms);
        let lease = call("lease grant", client.lease_grant(ttl, None))
            .await?
            .id();
        // Renewed from the start: etcd 3.4's Lock service does not keep a
        // waiter's lease alive, and a waiter whose lease ran out in the
        // queue is still answered "locked" once its predecessors are gone
        // (measured: 7 of 5 units sold twice in holder-crash before this).
        let held = Held {
            lease,
            watchdog: tokio::spawn(watchdog(client.clone(), lease, ttl)),
        };
        match locked(&mut client, ctx.product.id, lease, deadline).await {
            Ok(true) => Ok(Some(held)),
            // Not ours after all: revoking the lease takes our key out of
            // the queue (or out of the lock) whatever happened.
            not_ours => {
                drop(held);
                revoke(client, lease).await;
                not_ours.map(|_| None)
            }
        }
    }

    async fn release(&self, ctx: &BuyCtx<'_>, guard: Self::Guard) -> Result<(), BackendError> {
        let lease = guard.lease;
        drop(guard);
        call("lease revoke", client(ctx)?.lease_revoke(lease)).await?;
        Ok(())
    }

    fn waiting(&self) -> Waiting {
        Waiting::Queued
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            etcd_prefixes: vec![format!("{}/", lock_name(product.id))],
            ..Footprint::default()
        }
    }
}

/// Waits in the lock's queue on `lease` until `deadline`; `true` when the
/// lock is ours: answered, and our key still there on our lease (what
/// etcd 3.5 checks on the server; a holder frozen while it waited can
/// find it gone). Dropping the request at the deadline cancels the
/// server's wait.
async fn locked(
    client: &mut Client,
    product_id: i64,
    lease: i64,
    deadline: Instant,
) -> Result<bool, BackendError> {
    let options = LockOptions::new().with_lease(lease);
    let request = client.lock(lock_name(product_id), Some(options));
    let key = match tokio::time::timeout_at(deadline.into(), request).await {
        Ok(answer) => answer.map_err(etcd_error)?.key().to_vec(),
        Err(_elapsed) => return Ok(false),
    };
    let ours = call("reading the lock key", client.get(key, None)).await?;
    let mine = ours.kvs().first().is_some_and(|kv| kv.lease() == lease);
    if !mine {
        tracing::warn!(lease, "etcd answered locked, but our lock key is gone");
    }
    Ok(mine)
}

/// The instance's etcd client, or `unavailable`.
fn client(ctx: &BuyCtx<'_>) -> Result<Client, BackendError> {
    ctx.backends
        .etcd
        .clone()
        .ok_or_else(|| BackendError::Unavailable("etcd is not configured".into()))
}

/// One etcd call of a holder, bounded by [`CALL_TIMEOUT`].
async fn call<T>(
    what: &str,
    request: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, BackendError> {
    tokio::time::timeout(CALL_TIMEOUT, request)
        .await
        .map_err(|_| BackendError::Etcd(format!("{what} timed out")))?
        .map_err(etcd_error)
}

/// Renews `lease` every third of its TTL until aborted. A renewal that
/// fails is only logged: the holder cannot stop its section midway, and
/// the next renewal may get through.
async fn watchdog(mut client: Client, lease: i64, ttl: i64) {
    let every = Duration::from_millis(ttl as u64 * 1000 / 3);
    let mut stream = None;
    loop {
        tokio::time::sleep(every).await;
        if stream.is_none() {
            match client.lease_keep_alive(lease).await {
                Ok(opened) => stream = Some(opened),
                Err(error) => {
                    tracing::warn!(%error, lease, "etcd keep-alive stream failed");
                    continue;
                }
            }
        }
        let Some((keeper, answers)) = stream.as_mut() else {
            continue;
        };
        let renewed = async {
            keeper.keep_alive().await?;
            answers.message().await
        };
        match tokio::time::timeout(CALL_TIMEOUT, renewed).await {
            Ok(Ok(Some(answer))) if answer.ttl() > 0 => {}
            Ok(Ok(_)) => {
                tracing::warn!(lease, "etcd lease expired under its holder");
                return;
            }
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(lease, "etcd lease renewal failed");
                stream = None;
            }
        }
    }
}

/// Best effort: a lease that is not revoked runs out by itself.
async fn revoke(mut client: Client, lease: i64) {
    if let Err(error) = call("lease revoke", client.lease_revoke(lease)).await {
        tracing::debug!(%error, lease, "etcd lease not revoked");
    }
}

/// etcd errors as backend errors.
fn etcd_error(error: etcd_client::Error) -> BackendError {
    BackendError::Etcd(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_are_whole_seconds_never_below_the_lease() {
        assert_eq!(ttl_seconds(1), 1);
        assert_eq!(ttl_seconds(1000), 1);
        assert_eq!(ttl_seconds(1001), 2);
        assert_eq!(ttl_seconds(5000), 5);
    }
}
