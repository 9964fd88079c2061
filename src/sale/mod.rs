//! The sale as one use case, out of the HTTP layer: [`buy`] admits the
//! buyer (the sale window, a hidden path, a reservation), answers from the
//! instance's sold-out flag (a refused request with an Idempotency-Key is
//! first answered the order its key has, if any), puts a wave that came
//! due on sale, claims the
//! Idempotency-Key, and runs the sale in a task of its own (`settle`).
//! It returns what was bought or why not, in the contract's own terms
//! ([`ApiError`]: its code, its hints): the strategy's outcome is
//! translated once, here, and the HTTP handler only parses the request,
//! calls it and answers; the live view reads the answer's code.

pub mod guard;
pub mod hidden;
pub mod idempotency;
pub mod live;
pub mod memory;
pub mod operate;
pub mod placement;
pub mod product_store;
pub mod reservation;
mod settle;
pub mod waves;
pub mod window;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::Instrument;

use crate::backends::Backends;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::lane::LaneConn;
use crate::model::error::ApiError;
use crate::model::order::Order;
use crate::model::product::{Product, keys};
use crate::model::telemetry;
use crate::sale::hidden::Valid;
use crate::sale::idempotency::{Claim, Claimed, Keyed, Sold};
use crate::sale::memory::Memory;
use crate::sale::product_store::{Listed, Miss};
use crate::sale::reservation::Reservations;
use crate::stock::strategy::Catalogue;

/// What a purchase needs of the instance, shared by every buy (and by the
/// sale tasks, which outlive the request that started them).
pub struct Shop {
    /// Connections.
    pub backends: Backends,
    /// Strategies by id.
    pub catalogue: Catalogue,
    /// This instance's name, recorded as each order's `served_by`.
    pub instance: String,
    /// Signs and checks pre-booking reservations.
    pub reservations: Reservations,
    /// What the instance remembers: product copies, sold-out flags, the
    /// waves it knows are out, the live view's counts.
    pub memory: Arc<Memory>,
    /// How long a sale's answer is kept for a retry with its key.
    pub idempotency_ttl: Duration,
    /// Each backend path's adaptive limit and circuit breaker.
    pub guards: guard::Guards,
}

/// One buyer's request to buy one unit, parsed.
pub struct Purchase {
    /// The product.
    pub product: i64,
    /// The buyer.
    pub buyer: String,
    /// The buyer's reservation, for a product with pre-booking.
    pub reservation: Option<String>,
    /// The Idempotency-Key, when the client sent one.
    pub key: Option<String>,
    /// The hidden path it came on (`POST /stock/{id}/buy/{path}`), if any.
    pub path: Option<String>,
    /// Follows the buy through the logs.
    pub request_id: String,
}

/// What a purchase bought.
pub enum Bought {
    /// A new order.
    New(Sold),
    /// An earlier request with the same Idempotency-Key's order.
    Replayed(Sold),
}

/// Buys one unit for `purchase`.
pub async fn buy(
    shop: &Arc<Shop>,
    purchase: Purchase,
    started: Instant,
) -> Result<Bought, ApiError> {
    // After the sale is over, this is nearly every request: answered from
    // memory, no backend touched (a keyed one with one lookup of its key).
    let cached = shop.memory.products.get(purchase.product);
    let mut admitted = None;
    if let Ok(listed) = &cached {
        match shop.admitted(listed, &purchase).await? {
            Admitted::Go(path) => admitted = Some(path),
            Admitted::Answered(sold) => return Ok(Bought::Replayed(sold)),
        }
    }
    // The instance's one shared Redis connection (see `Lane`); every
    // command of this buy pipelines on it with everyone else's.
    let lane = shop.backends.lane.get().await.map_err(ApiError::Backend)?;
    let listed = shop.listing(cached, &lane, &purchase).await?;
    let path = match admitted {
        Some(path) => path,
        None => match shop.admitted(&listed, &purchase).await? {
            Admitted::Go(path) => path,
            Admitted::Answered(sold) => return Ok(Bought::Replayed(sold)),
        },
    };
    let mut redis = lane.conn.clone();
    let product = &listed.product;
    if let Some(path) = path {
        let key = purchase.key.as_deref();
        let used = lane.checked(used_once(&mut redis, product, &path, key, shop).await);
        if let Some(why) = used.map_err(ApiError::Backend)? {
            return Err(ApiError::BadPath(why));
        }
    }
    // A wave that came due goes on sale before the buy looks for stock.
    let store = listed.store.as_ref();
    let caught_up = waves::catch_up(
        &shop.backends,
        &mut redis,
        &shop.memory.waves,
        store,
        product,
        shop.backends.clock.now_ms(),
    );
    lane.checked(caught_up.await).map_err(ApiError::Backend)?;
    let order = Order {
        order_id: shop.backends.clock.order_id(),
        product_id: product.id,
        epoch: product.epoch,
        user_id: purchase.buyer,
        strategy: product.strategy.clone(),
        served_by: shop.instance.clone(),
    };
    let permit = shop.guarded(&listed)?;
    let claim = match &purchase.key {
        None => None,
        Some(key) => match shop
            .claim(&listed, &lane, key, &order)
            .await
            .map_err(ApiError::Backend)?
        {
            Claimed::Owner(claim) => Some(claim),
            Claimed::Replay(sold) => return Ok(Bought::Replayed(sold)),
            Claimed::InProgress => return Err(ApiError::busy(KEY_IN_PROGRESS)),
        },
    };
    let sale = Sale {
        listed,
        lane,
        order,
        claim,
        permit,
        started,
    };
    shop.sell(sale, &purchase.request_id).await.map(Bought::New)
}

/// One admitted sale, handed to [`settle::sell`].
struct Sale {
    listed: Arc<Listed>,
    lane: LaneConn,
    order: Order,
    /// The Idempotency-Key's claim, when the request carried one.
    claim: Option<Claim>,
    /// The path's guards' hold, given back with the strategy's answer.
    permit: Option<guard::Permit>,
    /// When the request arrived.
    started: Instant,
}

/// Why a request whose Idempotency-Key another request holds is `busy`.
const KEY_IN_PROGRESS: &str =
    "a request with this Idempotency-Key is still in progress, or its outcome is not settled yet";

/// What admitting a purchase decided.
enum Admitted {
    /// It goes on to the sale, on its hidden path if it came on one
    /// (checked once, here).
    Go(Option<Valid>),
    /// A refused retry whose Idempotency-Key already has an order: that
    /// order.
    Answered(Sold),
}

impl Shop {
    /// Admits `purchase` ([`Shop::admit`]) and answers from the sold-out
    /// flag. A refused request that carries an Idempotency-Key is first
    /// answered the order its key already has, if any: a retry after
    /// nginx's own 502/504 learns its outcome even once the window closed,
    /// its hidden path expired or the product sold out — at the cost of
    /// one lookup of the key, where a keyed sale would take four or five
    /// round trips.
    async fn admitted(&self, listed: &Listed, purchase: &Purchase) -> Result<Admitted, ApiError> {
        let product = &listed.product;
        let refused = match self.admit(product, purchase) {
            Ok(path) if !self.memory.sold_out.is_sold_out(product.id, product.epoch) => {
                return Ok(Admitted::Go(path));
            }
            Ok(_) => {
                telemetry::sold_out_flag();
                ApiError::SoldOut
            }
            Err(refused) => refused,
        };
        let Some(key) = purchase.key.as_deref() else {
            return Err(refused);
        };
        let keyed = Keyed {
            backends: &self.backends,
            store: listed.store.as_ref(),
            product,
            buyer: &purchase.buyer,
            key,
        };
        let lane = self.backends.lane.get().await.map_err(ApiError::Backend)?;
        let found = idempotency::answer(&mut lane.conn.clone(), &keyed).await;
        match lane.checked(found).map_err(ApiError::Backend)? {
            Some(Claimed::Replay(sold)) => Ok(Admitted::Answered(sold)),
            Some(_) => Err(ApiError::busy(KEY_IN_PROGRESS)),
            None => Err(refused),
        }
    }

    /// Whether the product sells to this buyer now: its sale window is
    /// open, it came on a valid hidden path where the product sells only
    /// on one (returned), and, with pre-booking, the buyer holds a
    /// reservation for this reset of it.
    fn admit(&self, product: &Product, purchase: &Purchase) -> Result<Option<Valid>, ApiError> {
        product.settings.admits(self.backends.clock.now_ms())?;
        let path = self.path_of(product, purchase)?;
        let token = purchase.reservation.as_deref().unwrap_or_default();
        let (id, epoch) = (product.id, product.epoch);
        if product.settings.prebooking
            && !self.reservations.holds(token, id, epoch, &purchase.buyer)
        {
            return Err(ApiError::NotReserved);
        }
        Ok(path)
    }

    /// The valid hidden path `purchase` came on, for a product that sells
    /// only on one; `None` for a product on its plain path.
    fn path_of(&self, product: &Product, purchase: &Purchase) -> Result<Option<Valid>, ApiError> {
        let of = (product.id, product.epoch, purchase.buyer.as_str());
        match (product.settings.hidden_path, purchase.path.as_deref()) {
            (false, None) => Ok(None),
            (false, Some(_)) => Err(ApiError::BadPath(
                "this product has no hidden path: it sells on POST /stock/{id}/buy",
            )),
            (true, None) => Err(ApiError::BadPath(
                "this product sells only on a path from GET /stock/{id}/path",
            )),
            (true, Some(path)) => {
                let now = self.backends.clock.now_ms();
                hidden::check(&self.reservations, path, of, now)
                    .map(Some)
                    .map_err(ApiError::BadPath)
            }
        }
    }

    /// The product as cached, or loaded after a miss.
    async fn listing(
        &self,
        cached: Result<Arc<Listed>, Miss>,
        lane: &LaneConn,
        purchase: &Purchase,
    ) -> Result<Arc<Listed>, ApiError> {
        let miss = match cached {
            Ok(listed) => return Ok(listed),
            Err(miss) => miss,
        };
        let stores = (&self.backends, &self.catalogue);
        let mut redis = lane.conn.clone();
        let filled = product_store::fill(
            &self.memory.products,
            miss,
            stores,
            &mut redis,
            purchase.product,
        );
        lane.checked(filled.await)
            .map_err(ApiError::Backend)?
            .ok_or(ApiError::UnknownProduct(purchase.product))
    }

    /// Past the product's path's guards, or answered `busy` at once:
    /// before the key is claimed, so a refused request leaves nothing
    /// behind.
    fn guarded(&self, listed: &Listed) -> Result<Option<guard::Permit>, ApiError> {
        let work = Duration::from_millis(listed.product.settings.work_ms);
        let path = (listed.strategy.info().id, listed.store.kind());
        self.guards.admit(&listed.guard, path, work)
    }

    /// Claims `key`, the order's buyer's Idempotency-Key, for `order`.
    async fn claim(
        &self,
        listed: &Listed,
        lane: &LaneConn,
        key: &str,
        order: &Order,
    ) -> Result<Claimed, BackendError> {
        let keyed = Keyed {
            backends: &self.backends,
            store: listed.store.as_ref(),
            product: &listed.product,
            buyer: &order.user_id,
            key,
        };
        let mut redis = lane.conn.clone();
        idempotency::claim(&mut redis, &keyed, order.order_id, self.idempotency_ttl).await
    }

    /// The sale ([`settle::sell`]), in its own task unless it is one step
    /// with nothing to settle ([`crate::stock::strategy::Strategy::one_step`]).
    /// Its span, which
    /// follows one buy through the logs, is for debugging
    /// (`RUST_LOG=seckill=debug`): the log formatter renders a span's
    /// fields when it is made, even if nothing inside ever logs, and that
    /// was 3% of an instance's CPU per sale in the profile. Its warnings
    /// and errors name the product themselves.
    async fn sell(self: &Arc<Self>, sale: Sale, request_id: &str) -> Result<Sold, ApiError> {
        let span = tracing::debug_span!(
            "buy",
            request_id = %request_id,
            instance = %self.instance,
            product = sale.order.product_id,
            strategy = %sale.listed.product.strategy,
        );
        let inline = sale.claim.is_none() && sale.listed.strategy.one_step();
        let sale = settle::sell(self.clone(), sale).instrument(span);
        if inline {
            return sale.await;
        }
        tokio::spawn(sale)
            .await
            .map_err(|e| ApiError::Backend(BackendError::Task(e.to_string())))?
    }
}

/// Marks `path` used; why not, for a path used before. A retry with the
/// Idempotency-Key its first use carried goes on (to be answered that
/// use's order, or `busy` while it runs): the marker holds the key.
async fn used_once(
    redis: &mut RedisConn,
    product: &Product,
    path: &Valid,
    key: Option<&str>,
    shop: &Shop,
) -> Result<Option<&'static str>, BackendError> {
    let marker = keys::path_used(product.id, &path.nonce);
    let life = path
        .expires_at_ms
        .saturating_sub(shop.backends.clock.now_ms())
        + 1_000;
    let before: Option<String> = redis::cmd("SET")
        .arg(&marker)
        .arg(key.unwrap_or_default())
        .arg("NX")
        .arg("GET")
        .arg("PX")
        .arg(life)
        .query_async(redis)
        .await?;
    Ok(match before {
        None => None,
        Some(first) if key.is_some_and(|k| !k.is_empty() && k == first) => None,
        Some(_) => Some("this path was used already: get a new one from GET /stock/{id}/path"),
    })
}
