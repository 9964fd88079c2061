//! Curator's other lock recipes on ZooKeeper, besides `InterProcessMutex`
//! (zookeeper-client's own `Client::lock`): the `zookeeper` strategy's
//! `recipe` setting picks one (see `zookeeper.rs`).
//!
//! - [`semaphore_mutex`]: `InterProcessSemaphoreMutex`, a semaphore of one
//!   lease (`InterProcessSemaphoreV2`): a mutex of its own guards the
//!   counting, each holder is a lease node, a waiter watches the lease
//!   directory until its lease is the only one. Not re-entrant; two
//!   znodes and a children watch per acquisition.
//! - [`write_lock`] and [`read_lock`]: `InterProcessReadWriteLock`, one
//!   queue of `__WRIT__` and `__READ__` nodes; a writer waits for every
//!   node before it, a reader only for the writers before it. Buyers
//!   write, stock queries read.
//! - [`buyer_lock`]: the buyer's own lock, which `InterProcessMultiLock`
//!   takes before the product's.
//!
//! Each node a recipe creates itself is an [`OwnedNode`], deleted when it
//! is dropped, so a cancelled wait leaves nothing in the queue.

use std::collections::HashSet;
use std::time::Instant;

use zookeeper_client as zk;

use crate::backends::failure::BackendError;

/// A node this instance created, deleted (in the background) on drop.
pub struct OwnedNode {
    client: zk::Client,
    path: String,
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        let client = self.client.clone();
        let path = std::mem::take(&mut self.path);
        tokio::spawn(async move {
            if let Err(error) = client.delete(&path, None).await {
                tracing::debug!(%error, path, "a lock node was already gone");
            }
        });
    }
}

/// The ACLs and ancestors every lock node gets.
fn lock_options() -> Result<zk::LockOptions<'static>, BackendError> {
    zk::LockOptions::new(zk::Acls::anyone_all())
        .with_ancestor_options(zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()))
        .map_err(zk_error)
}

/// Creates the ephemeral sequential node `{prefix}<sequence>`, and its
/// parents when missing.
async fn create_node(client: &zk::Client, prefix: &str) -> Result<OwnedNode, BackendError> {
    let mode = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let parents = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let parent = &prefix[..prefix.rfind('/').unwrap_or(0)];
    for attempt in 0..2 {
        match client.create(prefix, b"", &mode).await {
            Ok((_stat, sequence)) => {
                return Ok(OwnedNode {
                    client: client.clone(),
                    path: format!("{prefix}{sequence}"),
                });
            }
            Err(zk::Error::NoNode) if attempt == 0 => {
                client.mkdir(parent, &parents).await.map_err(zk_error)?;
            }
            Err(error) => return Err(zk_error(error)),
        }
    }
    Err(BackendError::ZooKeeper(format!("{parent} vanished twice")))
}

/// The unique names (`_c_<uuid>-lock-`) of the mutex nodes this process
/// waits with or holds: a node of this session under any other name is
/// an orphan ([`sweep_orphans`]).
static KNOWN: std::sync::LazyLock<std::sync::Mutex<HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);

/// A name in [`KNOWN`] for as long as this lives.
pub struct Known(String);

impl Known {
    fn new(name: String) -> Self {
        known().insert(name.clone());
        Self(name)
    }
}

impl Drop for Known {
    fn drop(&mut self) {
        known().remove(&self.0);
    }
}

fn known() -> std::sync::MutexGuard<'static, HashSet<String>> {
    KNOWN.lock().unwrap_or_else(|p| p.into_inner())
}

/// A lock queue's node, held: deleted (by zookeeper-client) when dropped,
/// its name known until then (fields drop in order).
pub struct Queued {
    _lock: zk::OwnedLockClient,
    _known: Option<Known>,
}

/// Waits in the queue `prefix` names until our node is first (the lock is
/// ours) or `deadline` passes (`None`; dropping the wait deletes our node,
/// so we leave the queue). `known` keeps the node's name known meanwhile.
async fn queue(
    client: &zk::Client,
    prefix: zk::LockPrefix<'_>,
    deadline: Instant,
    known: Option<Known>,
) -> Result<Option<Queued>, BackendError> {
    match tokio::time::timeout_at(deadline.into(), client.lock(prefix, b"", lock_options()?)).await
    {
        Ok(locked) => Ok(Some(Queued {
            _lock: locked.map_err(zk_error)?.into_owned(),
            _known: known,
        })),
        Err(_elapsed) => Ok(None),
    }
}

/// Deletes the mutex nodes under `dir` that this session owns but no
/// waiter or holder of this process knows: left behind when a clean-up
/// failed (a wait abandoned during a connection loss; see [`mutex`]), they
/// would lock the product for as long as the session lives. Best effort:
/// an error leaves them to the next sweep.
async fn sweep_orphans(client: &zk::Client, dir: &str) {
    let Ok(children) = client.list_children(dir).await else {
        return;
    };
    let suspects: Vec<String> = {
        let known = known();
        children
            .into_iter()
            .filter(|c| c.contains("lock-") && !known.iter().any(|k| c.starts_with(k.as_str())))
            .map(|c| format!("{dir}/{c}"))
            .collect()
    };
    if suspects.is_empty() {
        return;
    }
    let mut reader = client.new_multi_reader();
    for path in &suspects {
        if reader.add_get_data(path).is_err() {
            return;
        }
    }
    let Ok(results) = reader.commit().await else {
        return;
    };
    let session = client.session_id().0;
    for (path, result) in suspects.iter().zip(results) {
        if let zk::MultiReadResult::Data { stat, .. } = result
            && stat.ephemeral_owner == session
        {
            tracing::warn!(
                path,
                "deleting a lock node of this session that nothing here holds or waits with"
            );
            let _ = client.delete(path, None).await;
        }
    }
}

/// `InterProcessMutex` under `dir`: zookeeper-client's own recipe with
/// Curator's node names (`_c_<uuid>-lock-<sequence>`).
///
/// The names are built here and passed as a custom prefix rather than
/// through `LockPrefix::new_curator`: when a wait is abandoned while its
/// node's creation is unconfirmed (its deadline passes during a
/// connection loss), zookeeper-client 0.11 cleans a Curator-prefixed node
/// up by its bare child name, without its directory, so the delete fails
/// and the node outlives the wait for as long as the session lives — a
/// product locked for good. The `power-cut` scenario hit it: the create
/// reached ZooKeeper and its answer died with the server. A custom prefix
/// is cleaned up by its full path; and every wait first sweeps away this
/// session's nodes that nothing here knows ([`sweep_orphans`]), whatever
/// left them.
pub async fn mutex(
    client: &zk::Client,
    dir: &str,
    deadline: Instant,
) -> Result<Option<Queued>, BackendError> {
    sweep_orphans(client, dir).await;
    let name = format!("_c_{}-lock-", uuid::Uuid::new_v4());
    let known = Known::new(name.clone());
    let prefix = zk::LockPrefix::new_custom(format!("{dir}/{name}"), "lock-").map_err(zk_error)?;
    queue(client, prefix, deadline, Some(known)).await
}

/// Whether `watcher` fired before `deadline`.
async fn fired(watcher: zk::OneshotWatcher, deadline: Instant) -> bool {
    tokio::time::timeout_at(deadline.into(), watcher.changed())
        .await
        .is_ok()
}

/// A node name's sequence: its last ten digits (ZooKeeper pads them).
fn sequence(name: &str) -> &str {
    &name[name.len().saturating_sub(10)..]
}

/// `InterProcessSemaphoreMutex` under `dir`: `None` if `deadline` passed
/// first. The guard is the lease node.
pub async fn semaphore_mutex(
    client: &zk::Client,
    dir: &str,
    deadline: Instant,
) -> Result<Option<OwnedNode>, BackendError> {
    let locks = format!("{dir}/locks");
    let leases = format!("{dir}/leases");
    // The semaphore's own mutex, held only while counting leases.
    let Some(_counting) = mutex(client, &locks, deadline).await? else {
        return Ok(None);
    };
    let lease = create_node(client, &format!("{leases}/lease-")).await?;
    let ours = lease.path[leases.len() + 1..].to_owned();
    loop {
        let (children, watcher) = client
            .list_and_watch_children(&leases)
            .await
            .map_err(zk_error)?;
        if !children.contains(&ours) {
            return Err(BackendError::ZooKeeper(format!(
                "our lease {} vanished (session lost?)",
                lease.path
            )));
        }
        if children.len() <= 1 {
            return Ok(Some(lease));
        }
        if !fired(watcher, deadline).await {
            return Ok(None);
        }
    }
}

/// The write lock of `InterProcessReadWriteLock` under `dir`: a queue
/// place behind every node, reader or writer, that came before it.
pub async fn write_lock(
    client: &zk::Client,
    dir: &str,
    deadline: Instant,
) -> Result<Option<Queued>, BackendError> {
    // The node's name holds "__WRIT__"; waiting on every name holding
    // "__" puts the readers in the writer's queue too.
    let prefix = format!("{dir}/_c_{}-__WRIT__", uuid::Uuid::new_v4());
    let prefix = zk::LockPrefix::new_custom(prefix, "__").map_err(zk_error)?;
    queue(client, prefix, deadline, None).await
}

/// The read lock of `InterProcessReadWriteLock` under `dir`: held as soon
/// as no writer's node comes before ours.
pub async fn read_lock(
    client: &zk::Client,
    dir: &str,
    deadline: Instant,
) -> Result<Option<OwnedNode>, BackendError> {
    let node = create_node(
        client,
        &format!("{dir}/_c_{}-__READ__", uuid::Uuid::new_v4()),
    )
    .await?;
    let ours = node.path[dir.len() + 1..].to_owned();
    loop {
        let mut children = client.list_children(dir).await.map_err(zk_error)?;
        children.retain(|c| c.contains("__READ__") || c.contains("__WRIT__"));
        children.sort_by(|a, b| sequence(a).cmp(sequence(b)));
        let Some(index) = children.iter().position(|c| *c == ours) else {
            return Err(BackendError::ZooKeeper(format!(
                "our read node {} vanished (session lost?)",
                node.path
            )));
        };
        let Some(writer) = children[..index].iter().find(|c| c.contains("__WRIT__")) else {
            return Ok(Some(node));
        };
        let watched = client.get_and_watch_data(&format!("{dir}/{writer}")).await;
        let watcher = match watched {
            Ok((_data, _stat, watcher)) => watcher,
            // Gone between the listing and the watch: look again.
            Err(zk::Error::NoNode) => continue,
            Err(error) => return Err(zk_error(error)),
        };
        if !fired(watcher, deadline).await {
            return Ok(None);
        }
    }
}

/// The buyer's own lock under `dir` (one queue for all buyers of a
/// product, each buyer's nodes told apart by its name in hex, which holds
/// no `-`, so no buyer's name is a part of another's).
pub async fn buyer_lock(
    client: &zk::Client,
    dir: &str,
    buyer: &str,
    deadline: Instant,
) -> Result<Option<Queued>, BackendError> {
    let hex: String = buyer.bytes().map(|b| format!("{b:02x}")).collect();
    let name = format!("-{hex}-lock-");
    let prefix = format!("{dir}/_c_{}{name}", uuid::Uuid::new_v4());
    let prefix = zk::LockPrefix::new_custom(prefix, &name).map_err(zk_error)?;
    queue(client, prefix, deadline, None).await
}

/// ZooKeeper errors as backend errors.
pub fn zk_error(error: zk::Error) -> BackendError {
    BackendError::ZooKeeper(error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_the_padded_suffix() {
        assert_eq!(sequence("_c_ab-__READ__0000000012"), "0000000012");
        assert!(sequence("x-__WRIT__0000000009") < sequence("y-__READ__0000000010"));
    }
}
