//! The order writer: one task per instance that moves orders from the Redis
//! streams into PostgreSQL.
//!
//! The orders are sharded over a fixed set of streams (one per hash tag,
//! see `product::keys`), all known by name; on one Redis, one blocking
//! read waits on every one of them (on a cluster, see [`read_each`]). It reads through a consumer group, inserts each batch in one statement
//! that ignores order ids already present (a redelivered entry is harmless),
//! and acknowledges and deletes the entries only after the commit. Entries
//! left pending by a consumer that died (idle longer than `CLAIM_IDLE`)
//! are claimed by whichever writer looks next. On shutdown it drains the
//! stream before returning.

use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis::streams::{StreamAutoClaimOptions, StreamId, StreamReadOptions, StreamReadReply};
use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::master::MainRedis;
use crate::model::order::Order;
use crate::model::order::stream::parse_entry;
use crate::model::product::keys;
use crate::model::telemetry;

/// The consumer group every instance's writer joins.
pub const GROUP: &str = "order-writers";
/// Entries per read and per insert.
const BATCH: usize = 512;
/// How long one read blocks waiting for new entries.
const BLOCK_MS: usize = 100;
/// After a batch smaller than [`BATCH`], how long the writer lets orders
/// gather before it reads again: every read, insert and acknowledgement
/// costs Redis, PostgreSQL and the instance as much per batch as for
/// tens of orders, so under load fewer, larger batches are cheaper per
/// order; an order reaches PostgreSQL at most this much later (it is
/// durable in Redis, and counted in every ledger, meanwhile).
const LINGER: Duration = Duration::from_millis(10);
/// Pending entries idle this long belong to a dead or stuck consumer.
const CLAIM_IDLE: Duration = Duration::from_secs(5);
/// How often to look for such entries.
const CLAIM_EVERY: Duration = Duration::from_secs(1);

/// Runs the writer until `shutdown` turns true, then drains and returns.
///
/// Backend failures are logged and retried: entries stay pending in the
/// group, so nothing is lost while Redis or PostgreSQL is away.
pub async fn run(
    redis: MainRedis,
    pg: PgPool,
    consumer: String,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut writer = Writer {
        redis,
        pg,
        consumer,
        conn: None,
    };
    let mut last_claim = Instant::now();
    while !*shutdown.borrow() {
        let step = async {
            let moved = writer.step(Some(BLOCK_MS)).await?;
            if last_claim.elapsed() >= CLAIM_EVERY {
                last_claim = Instant::now();
                writer.claim_abandoned().await?;
            }
            Ok::<_, BackendError>(moved)
        };
        let pause = match step.await {
            Ok(moved) if moved > 0 && moved < BATCH => LINGER,
            Ok(_) => continue,
            Err(error) => {
                tracing::warn!(%error, "order writer: retrying");
                writer.conn = None;
                Duration::from_millis(200)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => {}
        }
    }
    for attempt in 0..50 {
        match writer.step(None).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, attempt, "order writer: drain failed, retrying");
                writer.conn = None;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    tracing::error!("order writer gave up draining; entries stay pending for another instance");
}

/// One writer's connections and identity.
struct Writer {
    redis: MainRedis,
    pg: PgPool,
    /// Unique per process, so a restarted instance never inherits a dead
    /// one's pending list by name (it inherits it by claiming instead).
    consumer: String,
    /// A dedicated connection: a blocking XREADGROUP would stall every
    /// other command multiplexed on a shared one.
    conn: Option<RedisConn>,
}

impl Writer {
    async fn conn(&mut self) -> Result<RedisConn, BackendError> {
        if let Some(conn) = &self.conn {
            return Ok(conn.clone());
        }
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(5)));
        let mut conn = self
            .redis
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        ensure_group(&mut conn).await?;
        self.conn = Some(conn.clone());
        Ok(conn)
    }

    /// Reads one batch of new entries (blocking up to `block_ms`), stores
    /// and acknowledges it. Returns how many entries it moved.
    async fn step(&mut self, block_ms: Option<usize>) -> Result<usize, BackendError> {
        let mut conn = self.conn().await?;
        let options = StreamReadOptions::default()
            .group(GROUP, &self.consumer)
            .count(BATCH);
        let streams = if conn.is_cluster() {
            read_each(&conn, &options).await?
        } else {
            let options = match block_ms {
                Some(ms) => options.block(ms),
                None => options,
            };
            let streams = keys::all_orders();
            let news = vec![">"; streams.len()];
            let reply: Option<StreamReadReply> =
                conn.xread_options(&streams, &news, &options).await?;
            reply.map(|r| r.keys).unwrap_or_default()
        };
        let mut moved = 0;
        for stream in streams {
            self.store(&mut conn, &stream.key, &stream.ids).await?;
            moved += stream.ids.len();
        }
        if moved == 0
            && conn.is_cluster()
            && let Some(ms) = block_ms
        {
            tokio::time::sleep(Duration::from_millis(ms as u64)).await;
        }
        Ok(moved)
    }

    /// Takes over entries another consumer left pending too long, stream
    /// by stream.
    async fn claim_abandoned(&mut self) -> Result<(), BackendError> {
        let mut conn = self.conn().await?;
        for stream in keys::all_orders() {
            let reply: redis::streams::StreamAutoClaimReply = conn
                .xautoclaim_options(
                    &stream,
                    GROUP,
                    &self.consumer,
                    CLAIM_IDLE.as_millis() as u64,
                    "0-0",
                    StreamAutoClaimOptions::default().count(BATCH),
                )
                .await?;
            if !reply.claimed.is_empty() {
                tracing::info!(count = reply.claimed.len(), %stream, "claimed abandoned orders");
            }
            self.store(&mut conn, &stream, &reply.claimed).await?;
        }
        Ok(())
    }

    /// Inserts the entries' orders (read from `stream`) in one statement,
    /// then XACK + XDEL.
    async fn store(
        &self,
        conn: &mut RedisConn,
        stream: &str,
        entries: &[StreamId],
    ) -> Result<(), BackendError> {
        if entries.is_empty() {
            return Ok(());
        }
        let orders: Vec<Order> = entries
            .iter()
            .filter_map(|entry| {
                let order = parse_entry(entry);
                if order.is_none() {
                    tracing::error!(id = %entry.id, "malformed order entry; acknowledging without storing");
                }
                order
            })
            .collect();
        insert_batch(&self.pg, &orders).await?;
        telemetry::writer_batch(orders.len(), oldest_age(entries));
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        redis::pipe()
            .atomic()
            .xack(stream, GROUP, &ids)
            .ignore()
            .xdel(stream, &ids)
            .ignore()
            .query_async::<()>(conn)
            .await?;
        Ok(())
    }
}

/// On a cluster: one non-blocking read per stream, all at once. A blocking
/// read may name the keys of one slot only, and a blocked read stalls
/// every other command to its node on the connection; so an idle writer
/// polls every `BLOCK_MS` instead of waiting inside Redis (64 cheap reads,
/// pipelined per master by the cluster connection).
async fn read_each(
    conn: &RedisConn,
    options: &StreamReadOptions,
) -> Result<Vec<redis::streams::StreamKey>, BackendError> {
    let reads = keys::all_orders().into_iter().map(|stream| {
        let mut conn = conn.clone();
        async move {
            let reply: Option<StreamReadReply> =
                conn.xread_options(&[&stream], &[">"], options).await?;
            Ok::<_, BackendError>(reply.map(|r| r.keys).unwrap_or_default())
        }
    });
    let mut streams = Vec::new();
    for read in futures::future::join_all(reads).await {
        streams.extend(read?);
    }
    Ok(streams)
}

/// How long ago the oldest entry was appended: a stream id starts with the
/// millisecond Redis appended it at.
fn oldest_age(entries: &[StreamId]) -> Duration {
    let oldest = entries
        .iter()
        .filter_map(|e| e.id.split('-').next()?.parse::<u64>().ok())
        .min();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    Duration::from_millis(oldest.map_or(0, |ms| now.saturating_sub(ms)))
}

/// Creates the consumer group (and the stream) of every order stream
/// unless it exists. Starting at id 0 means entries written before any
/// writer existed are not skipped.
async fn ensure_group(conn: &mut RedisConn) -> Result<(), BackendError> {
    for stream in keys::all_orders() {
        let created: redis::RedisResult<()> =
            conn.xgroup_create_mkstream(&stream, GROUP, "0").await;
        match created {
            Err(e) if e.code() == Some("BUSYGROUP") => {}
            other => other?,
        }
    }
    Ok(())
}

/// One `INSERT … SELECT FROM UNNEST` for the whole batch, idempotent on the
/// order id so a redelivered or claimed entry is stored once.
async fn insert_batch(pg: &PgPool, orders: &[Order]) -> Result<(), BackendError> {
    if orders.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = orders.iter().map(|o| o.order_id).collect();
    let products: Vec<i64> = orders.iter().map(|o| o.product_id).collect();
    let epochs: Vec<i64> = orders.iter().map(|o| o.epoch).collect();
    let users: Vec<String> = orders.iter().map(|o| o.user_id.clone()).collect();
    let strategies: Vec<String> = orders.iter().map(|o| o.strategy.clone()).collect();
    let served: Vec<String> = orders.iter().map(|o| o.served_by.clone()).collect();
    sqlx::query(
        concat!(
            "INSERT INTO orders (",
            crate::model::order::order_columns!(),
            ") SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[]) \
             ON CONFLICT (order_id) DO NOTHING"
        ),
    )
    .bind(ids)
    .bind(products)
    .bind(epochs)
    .bind(users)
    .bind(strategies)
    .bind(served)
    .execute(pg)
    .await?;
    Ok(())
}
