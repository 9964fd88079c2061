//! `POST /stock/{id}/buy`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tracing::Instrument;
use utoipa::IntoParams;
use uuid::Uuid;

use super::AppState;
use crate::backends::lane::LaneConn;
use crate::error::{ApiError, BackendError, ErrorBody};
use crate::idempotency::{self, Claim, Claimed, Keyed, Sold};
use crate::live;
use crate::orders::Order;
use crate::product::{Product, Window, now_ms, parse_id, truncate};
use crate::products::{self, Listed};
use crate::sale::BuyCtx;
use crate::strategy::Outcome;
use crate::telemetry;
use crate::waves;

/// Longest buyer id accepted.
const MAX_USER_LEN: usize = 64;

/// `?user=` as an alternative to the `X-User-Id` header.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BuyQuery {
    /// The buyer, when there is no `X-User-Id` header.
    #[param(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._:@-]+$")]
    pub user: Option<String>,
}

/// Sells one unit to the buyer, under the product's strategy. The body is
/// ignored (JMeter posts an empty form body).
#[utoipa::path(
    post,
    path = "/stock/{id}/buy",
    tag = "sale",
    params(
        ("id" = i64, Path, minimum = 1, description = "product id, 1 to 2^63-1"),
        ("X-User-Id" = String, Header, min_length = 1, max_length = 64,
         pattern = "^[A-Za-z0-9._:@-]+$",
         description = "the buyer; `?user=` is accepted in its place, for clients that \
                        cannot set a header (OpenAPI cannot say \"one of the two\")"),
        BuyQuery,
        ("X-Reservation" = Option<String>, Header, nullable = false, min_length = 1, max_length = 128,
         pattern = "^[!-~]+$",
         description = "the buyer's reservation (`POST /stock/{id}/reserve`), for a product with `prebooking`"),
        ("Idempotency-Key" = Option<String>, Header, nullable = false, min_length = 1, max_length = 128,
         pattern = "^[!-~]+$",
         description = "a retry with the same key (same product, buyer and reset) gets \
                        the original order back instead of buying again"),
    ),
    responses(
        (status = 200, description = "sold: one order recorded", body = Sold, headers(
            ("Idempotent-Replayed" = String, description = "`true` when this is the answer of an earlier request with the same Idempotency-Key"),
        )),
        (status = 400, description = "`bad_request`: a malformed id, buyer or Idempotency-Key, or no buyer", body = ErrorBody),
        (status = 403, description = "`not_started`: the product's sale window opens in `seconds_left` s; \
                                      `not_reserved`: the product sells only to buyers holding a reservation", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "seconds until the sale opens"),
        )),
        (status = 404, description = "`unknown_product`", body = ErrorBody),
        (status = 410, description = "`ended`: the product's sale window has closed", body = ErrorBody),
        (status = 409, description = "`sold_out` (between waves: with `seconds_left`, `opens_at_ms` and `Retry-After` for the next one), or `limit_reached` (the buyer holds the product's per-user limit)", body = ErrorBody),
        (status = 429, description = "`rate_limited` by the service or the gateway (`X-Limited-By` says which)", body = ErrorBody, headers(
            ("Retry-After" = u64, description = "seconds"),
            ("X-Limited-By" = String, description = "`service` or `gateway`"),
        )),
        (status = 500, description = "`backend`: a backend failed; a sale is recorded whole or not at all", body = ErrorBody),
        (status = 503, description = "`busy` (lock not acquired in time, retries exhausted, overloaded: nothing was sold), \
                                      `unavailable` (a backend was down before anything was sent), or \
                                      `outcome_unknown` (the sale may have happened: retry with the same Idempotency-Key)",
         body = ErrorBody, headers(("Retry-After" = u64, description = "seconds"))),
    )
)]
pub async fn buy(
    State(app): State<AppState>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<BuyQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let Path(raw_id) = path.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let id = parse_id(&raw_id)?;
    let answered = answer(&app, id, query, headers, started).await;
    // The live view counts what buyers of a known product were told.
    if let Some(kind) = live_answer(&answered) {
        app.inner
            .memory
            .live
            .record(id, kind, started.elapsed(), now_ms() / 1000);
    }
    answered
}

/// The live view's kind of an answer; `None` for a request that named no
/// product the service knows, or was malformed.
fn live_answer(answered: &Result<Response, ApiError>) -> Option<live::Answer> {
    use live::Answer;
    Some(match answered {
        Ok(_) => Answer::Sold,
        Err(ApiError::SoldOut | ApiError::SoldOutUntil { .. }) => Answer::SoldOut,
        Err(ApiError::Busy { .. } | ApiError::RateLimited { .. }) => Answer::Busy,
        Err(ApiError::LimitReached) => Answer::LimitReached,
        Err(ApiError::OutcomeUnknown { .. }) => Answer::Unknown,
        Err(ApiError::NotStarted { .. } | ApiError::Ended | ApiError::NotReserved) => {
            Answer::Refused
        }
        Err(ApiError::Backend(BackendError::OutcomeUnknown(_))) => Answer::Unknown,
        Err(ApiError::Backend(_) | ApiError::NotReady(_)) => Answer::Error,
        Err(_) => return None,
    })
}

/// [`buy`] once the product id is known.
async fn answer(
    app: &AppState,
    id: i64,
    query: Result<Query<BuyQuery>, QueryRejection>,
    headers: HeaderMap,
    started: Instant,
) -> Result<Response, ApiError> {
    let app = app.clone();
    let Query(query) = query.map_err(|e| ApiError::BadRequest(e.body_text()))?;
    let user = buyer(&headers, query.user)?;
    let reservation = reservation(&headers)?;
    let key = idempotency::parse(&headers)?;
    let memory = &app.inner.memory;
    // After the sale is over, this is nearly every request: answered from
    // memory, no backend touched. A retry with a key may be asking for an
    // order it already has, so it goes on to look.
    let cached = memory.products.get(id);
    if let Ok(listed) = &cached {
        // Decided before any backend is touched: a buyer early, late or
        // without a reservation is answered even with Redis down.
        admit(&app, &listed.product, &user, reservation)?;
        if key.is_none() && memory.sold_out.is_sold_out(id, listed.product.epoch) {
            telemetry::sold_out_flag();
            return Err(ApiError::SoldOut);
        }
    }
    // The instance's one shared Redis connection (see `Lane`); every
    // command of this buy pipelines on it with everyone else's.
    let lane = app.backends().lane.get().await?;
    let mut redis = lane.conn.clone();
    let listed = match cached {
        Ok(listed) => listed,
        Err(miss) => {
            let stores = (app.backends(), app.catalogue());
            let listed = products::fill(&memory.products, miss, stores, &mut redis, id)
                .await
                .inspect_err(|error| app.backends().lane.retire(&lane, error))?
                .ok_or(ApiError::UnknownProduct(id))?;
            admit(&app, &listed.product, &user, reservation)?;
            listed
        }
    };
    let product = &listed.product;
    // A wave that came due goes on sale before the buy looks for stock.
    waves::catch_up(
        app.backends(),
        &mut redis,
        &memory.waves,
        listed.store.as_ref(),
        product,
        now_ms(),
    )
    .await
    .inspect_err(|error| app.backends().lane.retire(&lane, error))?;
    let order = Order {
        order_id: Uuid::now_v7(),
        product_id: id,
        epoch: product.epoch,
        user_id: user,
        strategy: product.strategy.clone(),
        served_by: app.inner.instance.clone(),
    };
    let claim = match key {
        None => None,
        Some(key) => {
            let ttl = Duration::from_secs(app.inner.edge.idempotency_ttl_secs);
            let keyed = Keyed {
                backends: app.backends(),
                store: listed.store.as_ref(),
                product,
                buyer: &order.user_id,
                key: &key,
            };
            let claimed = idempotency::claim(&mut redis, &keyed, order.order_id, ttl).await?;
            match claimed {
                Claimed::Owner(claim) => Some(claim),
                Claimed::Replay(sold) => return Ok(replayed(sold)),
                Claimed::InProgress => {
                    return Err(ApiError::Busy {
                        message: "a request with this Idempotency-Key is still in progress, \
                                  or its outcome is not settled yet"
                            .into(),
                        retry_after: Duration::from_secs(1),
                    });
                }
            }
        }
    };
    // The sale runs in its own task: a client that hangs up (or the
    // request timeout) must not cut a sale off between the stock write
    // and the idempotency answer, or a lock between acquire and release.
    // Its span, which follows one buy through the logs, is for debugging
    // (`RUST_LOG=seckill=debug`): the log formatter renders a span's
    // fields when it is made, even if nothing inside ever logs, and that
    // was 3% of an instance's CPU per sale in the profile. Its warnings
    // and errors name the product themselves.
    let span = tracing::debug_span!(
        "buy",
        request_id = %request_id(&headers),
        instance = %app.inner.instance,
        product = id,
        strategy = %product.strategy,
    );
    let sale = tokio::spawn(
        sell(app.clone(), listed.clone(), lane, order, claim, started).instrument(span),
    );
    let sold = sale
        .await
        .map_err(|e| BackendError::Task(e.to_string()))??;
    Ok(Json(sold).into_response())
}

/// Whether the product sells to this buyer now: its sale window is open
/// and, with pre-booking, the buyer holds a reservation for this reset of
/// it (`X-Reservation`).
fn admit(
    app: &AppState,
    product: &Product,
    user: &str,
    reservation: Option<&str>,
) -> Result<(), ApiError> {
    match product.settings.window(now_ms()) {
        Window::Open => {}
        Window::NotStarted(ms) => {
            return Err(ApiError::NotStarted {
                starts_in: Duration::from_millis(ms),
                opens_at_ms: product.settings.opens_at_ms,
            });
        }
        Window::Ended => return Err(ApiError::Ended),
    }
    if product.settings.prebooking {
        let token = reservation.unwrap_or_default();
        if !app
            .inner
            .reservations
            .holds(token, product.id, product.epoch, user)
        {
            return Err(ApiError::NotReserved);
        }
    }
    Ok(())
}

/// Runs the product's strategy and settles the idempotency claim: the
/// answer recorded after a sale, the claim withdrawn otherwise. A sell-out
/// seen here sets the instance's sold-out flag.
async fn sell(
    app: AppState,
    listed: Arc<Listed>,
    lane: LaneConn,
    order: Order,
    claim: Option<Claim>,
    started: Instant,
) -> Result<Sold, ApiError> {
    let mut redis = lane.conn.clone();
    let (product, strategy) = (&listed.product, &listed.strategy);
    let ctx = BuyCtx {
        started,
        redis: redis.clone(),
        product,
        store: listed.store.as_ref(),
        order: &order,
        backends: app.backends(),
    };
    let outcome = strategy.buy(&ctx).await;
    if let Err(error) = &outcome {
        app.backends().lane.retire(&lane, error);
    }
    let label = outcome.as_ref().map_or("error", Outcome::label);
    telemetry::buy(strategy.info().id, label, started.elapsed());
    tracing::debug!(outcome = label, "buy done");
    let refusal = match outcome {
        Ok(Outcome::Sold { left }) => {
            let sold = Sold {
                order_id: order.order_id,
                product_id: product.id,
                strategy: order.strategy,
                served_by: order.served_by,
                // With waves the counter holds only what is on sale so
                // far: its count is not the buyer's unit of the stock.
                stock_left: left.filter(|_| product.settings.waves <= 1),
            };
            if let Some(claim) = &claim {
                // The order stands either way; without the answer the key
                // stays pending (retries are told `busy`, never sold twice).
                if let Err(error) = claim.record(&mut redis, &sold).await {
                    tracing::error!(%error, product = product.id, "idempotency answer not recorded");
                }
            }
            return Ok(sold);
        }
        Ok(Outcome::SoldOut) => {
            let now = now_ms();
            let settings = &product.settings;
            let due = settings.waves_due(now);
            if due < settings.waves {
                // Sold out until the next wave: no flag, come back then.
                let next_at_ms = settings.wave_opens_at(due + 1);
                ApiError::SoldOutUntil {
                    next_in: Duration::from_millis(next_at_ms.saturating_sub(now)),
                    next_at_ms,
                }
            } else {
                app.inner.memory.sold_out.mark(product.id, product.epoch);
                ApiError::SoldOut
            }
        }
        Ok(Outcome::LimitReached) => ApiError::LimitReached,
        Ok(Outcome::Busy {
            reason,
            retry_after,
        }) => ApiError::Busy {
            message: reason.to_owned(),
            retry_after,
        },
        Err(BackendError::OutcomeUnknown(cause)) => {
            count_unknown(&mut redis, product).await;
            // The claim stays: a retry with this key must not buy again
            // before anyone knows whether this one did.
            return Err(ApiError::OutcomeUnknown {
                order_id: order.order_id,
                cause,
            });
        }
        Err(error) => ApiError::Backend(error),
    };
    if let Some(claim) = &claim
        && let Err(error) = claim.withdraw(&mut redis).await
    {
        tracing::warn!(%error, product = product.id, "idempotency claim not withdrawn");
    }
    Err(refusal)
}

/// How long an unknown outcome's count is kept: a day of looking back.
const UNKNOWN_COUNT_TTL_SECS: u64 = 86_400;

/// Counts an `outcome_unknown` answer in the product's ledger. Best
/// effort, briefly: the backend that failed may be this very Redis.
async fn count_unknown(redis: &mut crate::backends::conn::RedisConn, product: &Product) {
    let key = crate::product::keys::unknown(product.id, product.epoch);
    let mut pipe = redis::pipe();
    pipe.incr(&key, 1)
        .ignore()
        .expire(&key, UNKNOWN_COUNT_TTL_SECS as i64)
        .ignore();
    let counted = pipe.query_async::<()>(redis);
    match tokio::time::timeout(Duration::from_millis(200), counted).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "unknown outcome not counted"),
        Err(_) => tracing::warn!("unknown outcome not counted: redis did not answer"),
    }
}

/// The gateway's request id (nginx sets `X-Request-Id` to its
/// `$request_id`), or a fresh one for a direct call, so one buy can be
/// followed through the logs.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map_or_else(|| Uuid::new_v4().simple().to_string(), str::to_owned)
}

/// A replayed sale: the original answer, marked as such.
fn replayed(sold: Sold) -> Response {
    let mut response = Json(sold).into_response();
    response
        .headers_mut()
        .insert(idempotency::REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The buyer id from `X-User-Id` (preferred) or `?user=`: 1 to 64
/// characters of `A-Z a-z 0-9 . _ : @ -`, so it is safe in logs, keys and
/// CSV. A malformed `?user=` is refused even beside a header, rather than
/// silently ignored.
pub fn buyer(headers: &HeaderMap, from_query: Option<String>) -> Result<String, ApiError> {
    let from_query = from_query.map(valid_buyer).transpose()?;
    match headers.get("x-user-id") {
        Some(value) => valid_buyer(
            value
                .to_str()
                .map_err(|_| ApiError::BadRequest("X-User-Id must be printable ASCII".into()))?
                .to_owned(),
        ),
        None => from_query.ok_or_else(|| {
            ApiError::BadRequest("a buyer is required: X-User-Id header or ?user=".into())
        }),
    }
}

/// Longest `X-Reservation` accepted (a token is 64 hex digits).
const MAX_RESERVATION_LEN: usize = 128;

/// `X-Reservation`, when sent: 1 to 128 visible ASCII characters, as the
/// document says, checked on every buy — a malformed one is refused
/// whether or not the product takes reservations (Schemathesis sent an
/// empty one to a product without pre-booking and it was accepted).
fn reservation(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let Some(value) = headers.get("x-reservation") else {
        return Ok(None);
    };
    let visible = |token: &str| token.bytes().all(|b| (b'!'..=b'~').contains(&b));
    match value.to_str() {
        Ok(token) if !token.is_empty() && token.len() <= MAX_RESERVATION_LEN && visible(token) => {
            Ok(Some(token))
        }
        _ => Err(ApiError::BadRequest(format!(
            "X-Reservation must be 1 to {MAX_RESERVATION_LEN} visible ASCII characters"
        ))),
    }
}

/// `raw` if it is a well-formed buyer id.
fn valid_buyer(raw: String) -> Result<String, ApiError> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || "._:@-".contains(c);
    if raw.is_empty() || raw.len() > MAX_USER_LEN || !raw.chars().all(valid_char) {
        return Err(ApiError::BadRequest(format!(
            "buyer id must be 1 to {MAX_USER_LEN} characters of A-Z a-z 0-9 . _ : @ -, got {:?}",
            truncate(&raw, 40)
        )));
    }
    Ok(raw)
}
