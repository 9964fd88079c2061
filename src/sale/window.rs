//! Pausing, resuming and closing a live sale without a reset
//! ([`change`]): its orders, holds, stock and epoch stay; only its
//! `paused` and `closes_at_ms` settings move.
//!
//! Every instance judges a buy on its own copy of the product, so the
//! change answers only once no instance can still admit under the old
//! window: each one that heard the broadcast has forgotten its copy, and
//! if one did not acknowledge (or none was reached), the operation waits
//! out the copies' lifetime (`CACHE_TTL`) before it answers. A buy sent
//! after the answer is judged by the new window; one admitted before it
//! may still finish, as one admitted just before `closes_at_ms` does.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::backends::failure::BackendError;
use crate::model::error::ApiError;
use crate::model::product::operation::WindowAction;
use crate::model::product::{Settings, Window};
use crate::sale::Shop;
use crate::sale::memory::{self, Told};
use crate::sale::product_store::{self, CACHE_TTL};

/// What `POST /admin/products/{id}/window` answers: the window in effect.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
pub struct WindowMoved {
    /// The product.
    pub product_id: i64,
    /// Its reset, unchanged.
    pub epoch: i64,
    /// What was asked.
    pub action: WindowAction,
    /// False when the sale already was as asked: nothing was written.
    pub changed: bool,
    /// Whether the sale is paused now.
    pub paused: bool,
    /// When it opens (ms since the Unix epoch; 0: from its reset).
    pub opens_at_ms: u64,
    /// When it closes (ms since the Unix epoch, on the shared clock; 0:
    /// never). A close sets it to the moment it took effect.
    pub closes_at_ms: u64,
    /// The shared clock's time when the change was decided.
    pub at_ms: u64,
}

/// Pauses, resumes or closes product `id`'s sale. Pausing or resuming a
/// closed sale is 410 `ended`; asking for the state it is in changes
/// nothing (a retry is safe). A reset in between is 503 `busy`.
pub async fn change(shop: &Shop, id: i64, action: WindowAction) -> Result<WindowMoved, ApiError> {
    let lane = shop.backends.lane.get().await.map_err(ApiError::Backend)?;
    let product = product_store::load(&shop.backends, &mut lane.conn.clone(), id)
        .await?
        .ok_or(ApiError::UnknownProduct(id))?;
    drop(lane);
    let now = shop.backends.clock.now_ms();
    let rewritten = product_store::rewrite_settings(&shop.backends, id, product.epoch, |p| {
        next(&p.settings, action, now)
    })
    .await?
    .ok_or_else(|| ApiError::busy("the product was reset during the change; nothing changed"))?;
    if rewritten.changed {
        settle(shop, id).await;
        tracing::info!(
            product = id,
            action = action.as_str(),
            "sale window changed"
        );
    }
    let settings = rewritten.product.settings;
    Ok(WindowMoved {
        product_id: id,
        epoch: rewritten.product.epoch,
        action,
        changed: rewritten.changed,
        paused: settings.paused,
        opens_at_ms: settings.opens_at_ms,
        closes_at_ms: settings.closes_at_ms,
        at_ms: now,
    })
}

/// The settings after `action` at `now` (the shared clock's), or `None`
/// when they already are as asked.
fn next(settings: &Settings, action: WindowAction, now: u64) -> Result<Option<Settings>, ApiError> {
    let ended = settings.window(now) == Window::Ended;
    let next = match action {
        WindowAction::Pause | WindowAction::Resume if ended => return Err(ApiError::Ended),
        WindowAction::Close if ended => None,
        WindowAction::Pause => (!settings.paused).then_some(Settings {
            paused: true,
            ..*settings
        }),
        WindowAction::Resume => settings.paused.then_some(Settings {
            paused: false,
            ..*settings
        }),
        WindowAction::Close => Some(Settings {
            closes_at_ms: now,
            ..*settings
        }),
    };
    Ok(next)
}

/// Every instance forgets its copy of the product before the change
/// answers; where one may not have (it did not acknowledge, or the
/// broadcast failed), the copies' lifetime is waited out instead.
async fn settle(shop: &Shop, id: i64) {
    shop.memory.products.forget(id);
    let told = match shop.backends.redis.get().await {
        Ok(mut conn) => memory::broadcast_moved(&mut conn, id).await,
        Err(error) => Err(BackendError::from(error)),
    };
    match told {
        Ok(Told { receivers, acked }) if receivers > 0 && acked == receivers => {}
        Ok(told) => {
            tracing::warn!(product = id, ?told, "a window change waits out the copies");
            tokio::time::sleep(CACHE_TTL).await;
        }
        Err(error) => {
            tracing::warn!(%error, product = id, "a window change was not announced; waiting out the copies");
            tokio::time::sleep(CACHE_TTL).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_moves_only_its_setting() {
        let open = Settings::default();
        let paused = next(&open, WindowAction::Pause, 10).unwrap().unwrap();
        assert!(paused.paused);
        assert_eq!(next(&paused, WindowAction::Pause, 10).unwrap(), None);
        let resumed = next(&paused, WindowAction::Resume, 20).unwrap().unwrap();
        assert_eq!(resumed, open);
        assert_eq!(next(&open, WindowAction::Resume, 20).unwrap(), None);
        let closed = next(&paused, WindowAction::Close, 30).unwrap().unwrap();
        assert_eq!(closed.closes_at_ms, 30);
        assert_eq!(closed.window(30), Window::Ended);
        assert_eq!(next(&closed, WindowAction::Close, 40).unwrap(), None);
        for action in [WindowAction::Pause, WindowAction::Resume] {
            let refused = next(&closed, action, 40).expect_err("a closed sale moved");
            assert!(matches!(refused, ApiError::Ended));
        }
    }
}
