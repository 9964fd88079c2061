//! `zookeeper`: Curator's `InterProcessMutex` recipe — an ephemeral
//! sequential node under a per-product path; each waiter watches only its
//! predecessor and proceeds when its node is first.
//!
//! The recipe is zookeeper-client's own `Client::lock` with a Curator-style
//! prefix (`_c_<uuid>-lock-<seq>`): it watches only the predecessor, finds
//! its node again after a connection loss, and deletes the node when the
//! wait is cancelled. Writing it again here would only add bugs.
//!
//! The `recipe` setting swaps in Curator's other recipes (`curator.rs`):
//! `semaphore-mutex`, `read-write` (buyers write, stock queries read) and
//! `multi-lock` (the buyer's lock, then the product's). Each is raced as
//! a row of its own in the comparison.
//!
//! Known failure: none while sessions behave; a crashed holder's node
//! vanishes when its session expires (the lab sets a short session timeout
//! — ZooKeeper's default kept a dead client's node for ~30 s). A holder
//! that is merely frozen keeps its session only as long as the timeout, so
//! a freeze longer than it lets the next waiter in, like a lease.

use std::time::Instant;

use zookeeper_client as zk;

use super::{Acquired, Lock, Reading, Waiting, curator};
use crate::backends::Footprint;
use crate::backends::failure::BackendError;
use crate::model::product::{Product, Recipe};
use crate::model::seam::BuyCtx;

/// The per-product directory of lock nodes (`mutex`, and `multi-lock`'s
/// product lock).
fn lock_dir(product_id: i64) -> String {
    format!("/seckill/locks/{product_id}")
}

/// Where each other recipe keeps its nodes: below the mutex's directory,
/// under names its queue never counts (they hold no `lock-`).
fn recipe_dir(product_id: i64, recipe: Recipe) -> String {
    let sub = match recipe {
        Recipe::Mutex => return lock_dir(product_id),
        Recipe::SemaphoreMutex => "semaphore",
        Recipe::ReadWrite => "rw",
        Recipe::MultiLock => "buyers",
    };
    format!("{}/{sub}", lock_dir(product_id))
}

/// The ZooKeeper lock, following the product's `recipe`.
pub struct ZooKeeperLock;

/// What a holder keeps until it releases: its node(s); dropping them
/// deletes them.
pub enum Held {
    /// A node in a lock queue (`mutex`, the write lock).
    Queued(curator::Queued),
    /// The semaphore's lease node.
    Lease(curator::OwnedNode),
    /// `multi-lock`: the buyer's lock, then the product's, released in
    /// reverse.
    Both {
        /// The buyer's lock, taken first.
        buyer: curator::Queued,
        /// The product's, taken second.
        product: curator::Queued,
    },
}

/// Takes the lock `recipe` describes, once, on `client`'s session.
async fn take(
    client: &zk::Client,
    ctx: &BuyCtx<'_>,
    recipe: Recipe,
    deadline: Instant,
) -> Result<Option<Held>, BackendError> {
    let id = ctx.product.id;
    Ok(match recipe {
        Recipe::Mutex => curator::mutex(client, &lock_dir(id), deadline)
            .await?
            .map(Held::Queued),
        Recipe::SemaphoreMutex => {
            curator::semaphore_mutex(client, &recipe_dir(id, recipe), deadline)
                .await?
                .map(Held::Lease)
        }
        Recipe::ReadWrite => curator::write_lock(client, &recipe_dir(id, recipe), deadline)
            .await?
            .map(Held::Queued),
        Recipe::MultiLock => {
            let buyer = curator::buyer_lock(
                client,
                &recipe_dir(id, recipe),
                &ctx.order.user_id,
                deadline,
            )
            .await?;
            let Some(buyer) = buyer else {
                return Ok(None);
            };
            // Without the product's lock in time, the buyer's goes too
            // (dropped), as Curator's multi-lock releases what it took.
            curator::mutex(client, &lock_dir(id), deadline)
                .await?
                .map(|product| Held::Both { buyer, product })
        }
    })
}

/// The instance's ZooKeeper session, or `unavailable`.
fn session(
    backends: &crate::backends::Backends,
) -> Result<&crate::backends::zookeeper::ZkSession, BackendError> {
    backends
        .zookeeper
        .as_ref()
        .ok_or_else(|| BackendError::Unavailable("zookeeper is not configured".into()))
}

/// A session can end between the check and the call (a pause the client
/// has not noticed yet): then the step runs once more, on a new session.
fn retried(error: &BackendError, attempt: u32) -> bool {
    attempt == 0
        && matches!(error, BackendError::ZooKeeper(text) if *text == zk::Error::SessionExpired.to_string())
}

impl Lock for ZooKeeperLock {
    type Guard = Held;

    async fn acquire(&self, ctx: &BuyCtx<'_>, deadline: Instant) -> Acquired<Self::Guard> {
        let session = session(ctx.backends)?;
        let recipe = ctx.product.settings.recipe;
        let mut attempt = 0;
        loop {
            let client = session.client().await?;
            match take(&client, ctx, recipe, deadline).await {
                Err(error) if retried(&error, attempt) => attempt += 1,
                done => return done,
            }
        }
    }

    async fn release(&self, _ctx: &BuyCtx<'_>, guard: Self::Guard) -> Result<(), BackendError> {
        // Dropping a node deletes it; ZooKeeper orders the delete before
        // anything this session does next.
        if let Held::Both { buyer, product } = guard {
            drop(product);
            drop(buyer);
        }
        Ok(())
    }

    async fn read(
        &self,
        backends: &crate::backends::Backends,
        product: &Product,
        deadline: Instant,
    ) -> Result<Reading, BackendError> {
        if product.settings.recipe != Recipe::ReadWrite {
            return Ok(Reading::Unlocked);
        }
        let client = session(backends)?.client().await?;
        let dir = recipe_dir(product.id, Recipe::ReadWrite);
        Ok(match curator::read_lock(&client, &dir, deadline).await? {
            Some(node) => Reading::Held(Box::new(node)),
            None => Reading::TimedOut,
        })
    }

    fn waiting(&self) -> Waiting {
        Waiting::Queued
    }

    fn footprint(&self, product: &Product) -> Footprint {
        let semaphore = recipe_dir(product.id, Recipe::SemaphoreMutex);
        Footprint {
            lock_nodes: vec![
                lock_dir(product.id),
                format!("{semaphore}/locks"),
                format!("{semaphore}/leases"),
                recipe_dir(product.id, Recipe::ReadWrite),
                recipe_dir(product.id, Recipe::MultiLock),
            ],
            ..Footprint::default()
        }
    }
}
