//! `zookeeper`: Curator's `InterProcessMutex` recipe — an ephemeral
//! sequential node under a per-product path; each waiter watches only its
//! predecessor and proceeds when its node is first.
//!
//! The recipe is zookeeper-client's own `Client::lock` with a Curator-style
//! prefix (`_c_<uuid>-lock-<seq>`): it watches only the predecessor, finds
//! its node again after a connection loss, and deletes the node when the
//! wait is cancelled. Writing it again here would only add bugs.
//!
//! Known failure: none while sessions behave; a crashed holder's node
//! vanishes when its session expires (the lab sets a short session timeout
//! — ZooKeeper's default kept a dead client's node for ~30 s). A holder
//! that is merely frozen keeps its session only as long as the timeout, so
//! a freeze longer than it lets the next waiter in, like a lease.

use std::time::Instant;

use zookeeper_client as zk;

use super::{Lock, Waiting};
use crate::backends::Footprint;
use crate::error::BackendError;
use crate::info::{Expect, Hazard, Info};
use crate::product::{Product, StoreKind};
use crate::sale::BuyCtx;

/// The `zookeeper` strategy's catalogue entry.
pub const INFO: Info = Info {
    id: "zookeeper",
    backend: "zookeeper",
    store: StoreKind::Redis,
    mechanism: "ephemeral sequential node per buyer, watch only the predecessor (Curator's InterProcessMutex)",
    safe: true,
    safe_against: "many instances; slow holders (no lease to outlive); a crashed holder (its node dies with its session)",
    unsafe_against: "a holder frozen, or cut off from ZooKeeper, longer than its session timeout (the session expires under it)",
    under: &[
        (Hazard::Contention, Expect::NoOversell),
        (Hazard::LeaseExpiry, Expect::SellsAll),
        (Hazard::FrozenHolder, Expect::Oversells),
        (Hazard::HolderCrash, Expect::SellsAll),
        (Hazard::Partition, Expect::Oversells),
    ],
};

/// The per-product directory of lock nodes.
fn lock_dir(product_id: i64) -> String {
    format!("/seckill/locks/{product_id}")
}

/// The ZooKeeper lock.
pub struct ZooKeeperLock;

impl Lock for ZooKeeperLock {
    /// Our lock node; dropping it deletes the node.
    type Guard = zk::OwnedLockClient;

    async fn acquire(
        &self,
        ctx: &BuyCtx<'_>,
        deadline: Instant,
    ) -> Result<Option<Self::Guard>, BackendError> {
        let session = ctx
            .backends
            .zookeeper
            .as_ref()
            .ok_or_else(|| BackendError::Unavailable("zookeeper is not configured".into()))?;
        let dir = lock_dir(ctx.product.id);
        // A session can end between the check and the call (a pause the
        // client has not noticed yet): then once more, on a new session.
        for attempt in 0..2 {
            let client = session.client().await?;
            let prefix = zk::LockPrefix::new_curator(&dir, "lock-").map_err(zk_error)?;
            let options = zk::LockOptions::new(zk::Acls::anyone_all())
                .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
                .map_err(zk_error)?;
            match tokio::time::timeout_at(deadline.into(), client.lock(prefix, b"", options)).await
            {
                Ok(Ok(locked)) => return Ok(Some(locked.into_owned())),
                Ok(Err(zk::Error::SessionExpired)) if attempt == 0 => {}
                Ok(Err(error)) => return Err(zk_error(error)),
                // Dropping the wait deletes our node: we leave the queue.
                Err(_elapsed) => return Ok(None),
            }
        }
        Err(BackendError::ZooKeeper(
            "session expired twice in a row".into(),
        ))
    }

    async fn release(&self, _ctx: &BuyCtx<'_>, guard: Self::Guard) -> Result<(), BackendError> {
        // Dropping the lock client sends the delete of our node; ZooKeeper
        // orders it before anything this session does next.
        drop(guard);
        Ok(())
    }

    fn waiting(&self) -> Waiting {
        Waiting::Queued
    }

    fn footprint(&self, product: &Product) -> Footprint {
        Footprint {
            lock_nodes: vec![lock_dir(product.id)],
            ..Footprint::default()
        }
    }
}

/// ZooKeeper errors as backend errors.
fn zk_error(error: zk::Error) -> BackendError {
    BackendError::ZooKeeper(error.to_string())
}
