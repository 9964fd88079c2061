//! Fixed-duration load: `n` workers each run one operation after another
//! until the deadline; only operations that start after the warm-up and
//! end before the deadline are counted.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::Script;

use super::lean::{self, Conn};
use crate::judge::check::history::Op;
use crate::lab::client::{Answer, Gateway};
use crate::model::product::now_ms;
use crate::race::driver::Attempt;

/// What one measured window saw.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// Latency of every counted operation, sorted.
    latencies: Vec<Duration>,
    /// Counted operations that succeeded.
    ok: u64,
    /// Counted failures by error.
    pub errors: BTreeMap<String, u64>,
    /// The window's length.
    window: Duration,
}

impl Sample {
    /// Counted operations per second.
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Counted operations.
    pub fn count(&self) -> u64 {
        self.latencies.len() as u64
    }

    /// Counted operations that succeeded.
    pub fn ok(&self) -> u64 {
        self.ok
    }

    /// Successful operations per second.
    pub fn ok_rate(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Nearest-rank percentile, in ms.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        crate::race::driver::percentile_ms(&self.latencies, q)
    }
}

/// Runs `op(state, seq)` from one worker per entry of `states` (`seq`
/// unique across them) for `warmup` plus `duration`: each worker owns its
/// state (a connection, a buffer), which `op` takes and hands back with
/// `None` on success or the error's name, and a value kept for every
/// operation, counted or not.
pub async fn run_for<S, T, F, Fut>(
    states: Vec<S>,
    warmup: Duration,
    duration: Duration,
    op: F,
) -> (Sample, Vec<T>)
where
    S: Send + 'static,
    T: Send + 'static,
    F: Fn(S, usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (S, Option<String>, T)> + Send,
{
    let begin = Instant::now();
    let measured_from = begin + warmup;
    let end = measured_from + duration;
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = states
        .into_iter()
        .map(|mut state| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut kept = Vec::new();
                while Instant::now() < end {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    let started = Instant::now();
                    let (back, error, value) = op(state, seq).await;
                    state = back;
                    let finished = Instant::now();
                    if started >= measured_from && finished <= end {
                        seen.push((finished - started, error));
                    }
                    kept.push(value);
                }
                (seen, kept)
            })
        })
        .collect();
    let mut sample = Sample {
        window: duration,
        ..Sample::default()
    };
    let mut values = Vec::new();
    for worker in workers {
        // A worker that panicked counts nothing; the others still do.
        let Ok((seen, kept)) = worker.await else {
            continue;
        };
        for (latency, error) in seen {
            sample.latencies.push(latency);
            match error {
                None => sample.ok += 1,
                Some(code) => *sample.errors.entry(code).or_default() += 1,
            }
        }
        values.extend(kept);
    }
    sample.latencies.sort();
    (sample, values)
}

/// `n` connections to the gateway at `base`, one per worker.
async fn conns(base: &str, n: usize) -> anyhow::Result<Vec<Conn>> {
    let addr = lean::resolve(base).await?;
    Ok((0..n.max(1)).map(|_| Conn::new(addr)).collect())
}

/// The HTTP path alone: `GET /healthz` through the gateway.
pub async fn http(
    target: &Gateway,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let request: Arc<[u8]> = Arc::from(
        format!(
            "GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n",
            lean::authority(&target.base)
        )
        .into_bytes(),
    );
    let op = move |mut conn: Conn, _| {
        let request = request.clone();
        async move {
            let error = match conn.send(&request, true).await {
                Ok(reply) if reply.status == 200 => None,
                Ok(reply) => Some(format!("http_{}", reply.status)),
                Err(_) => Some("transport".to_owned()),
            };
            (conn, error, ())
        }
    };
    let states = conns(&target.base, n).await?;
    Ok(run_for(states, warmup, duration, op).await.0)
}

/// Redis alone: the check-and-decrement a sale makes, as one script per
/// call, from `n` callers over a few multiplexed connections.
pub async fn redis(
    url: &str,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Sample> {
    const KEY: &str = "seckill:bench:stock";
    let client = redis::Client::open(url)?;
    let mut connections = Vec::new();
    for _ in 0..n.clamp(1, 8) {
        connections.push(client.get_multiplexed_async_connection().await?);
    }
    let _: () = redis::cmd("SET")
        .arg(KEY)
        .arg(i64::MAX / 2)
        .query_async(&mut connections[0])
        .await?;
    let script = Arc::new(Script::new(
        "if tonumber(redis.call('GET', KEYS[1]) or '0') <= 0 then return 0 end \
         redis.call('DECR', KEYS[1]) return 1",
    ));
    let op = move |mut conn: redis::aio::MultiplexedConnection, _| {
        let script = script.clone();
        async move {
            let answer: redis::RedisResult<i64> = script.key(KEY).invoke_async(&mut conn).await;
            let error = match answer {
                Ok(1) => None,
                Ok(_) => Some("sold_out".to_owned()),
                Err(_) => Some("redis".to_owned()),
            };
            (conn, error, ())
        }
    };
    let states = (0..n.max(1))
        .map(|i| connections[i % connections.len()].clone())
        .collect();
    let sample = run_for(states, warmup, duration, op).await.0;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let _: () = redis::cmd("DEL").arg(KEY).query_async(&mut conn).await?;
    Ok(sample)
}

/// A pool of `n` connections for [`postgres`], opened before its figure
/// and closed after it (by the caller), so that the figure's CPU window
/// sees its backends alive from end to end.
pub async fn postgres_pool(url: &str, n: usize) -> anyhow::Result<sqlx::PgPool> {
    Ok(sqlx::postgres::PgPoolOptions::new()
        .max_connections(n.clamp(1, 200) as u32)
        .connect(url)
        .await?)
}

/// PostgreSQL alone: the hot-row conditional decrement, one statement per
/// transaction, from `n` connections of `pool`.
pub async fn postgres(
    pool: &sqlx::PgPool,
    product: i64,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> Sample {
    let op = move |pool: sqlx::PgPool, _| async move {
        let done = sqlx::query("UPDATE products SET stock = stock - 1 WHERE id = $1 AND stock > 0")
            .bind(product)
            .execute(&pool)
            .await;
        let error = match done {
            Ok(r) if r.rows_affected() == 1 => None,
            Ok(_) => Some("sold_out".to_owned()),
            Err(_) => Some("postgres".to_owned()),
        };
        (pool, error, ())
    };
    let states = (0..n.max(1)).map(|_| pool.clone()).collect();
    run_for(states, warmup, duration, op).await.0
}

/// Buys of `product` through the gateway, each from a new buyer; every
/// attempt is kept for the history check, with when the load began.
pub async fn buys(
    target: &Gateway,
    product: i64,
    keyed: bool,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<(Sample, Vec<Attempt>, Instant)> {
    let states = conns(&target.base, n).await?;
    let began = Instant::now();
    let buyers: Arc<str> = Arc::from(format!(
        "bench-{product}-{:06x}",
        rand::random::<u32>() & 0xff_ffff
    ));
    let head: Arc<[u8]> = Arc::from(
        format!(
            "POST /stock/{product}/buy HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\nX-User-Id: ",
            lean::authority(&target.base)
        )
        .into_bytes(),
    );
    let signer = target.buyer_signer().cloned();
    let op = move |(mut conn, mut request): (Conn, Vec<u8>), seq: usize| {
        let (head, buyer) = (head.clone(), format!("{buyers}-{seq}"));
        // With buyer tokens, each new buyer's is signed here, as a login
        // would have handed it out: the client's CPU, not the instances'.
        let token = signer
            .as_ref()
            .map(|signer| signer.token(&buyer, now_ms() / 1000, 3600));
        async move {
            request.clear();
            request.extend_from_slice(&head);
            request.extend_from_slice(buyer.as_bytes());
            if keyed {
                // One key per buy, as a careful client sends.
                request.extend_from_slice(b"\r\nIdempotency-Key: ");
                request.extend_from_slice(buyer.as_bytes());
            }
            if let Some(token) = token {
                request.extend_from_slice(b"\r\nAuthorization: Bearer ");
                request.extend_from_slice(token.as_bytes());
            }
            request.extend_from_slice(b"\r\n\r\n");
            let sent = Instant::now();
            // A buy is never sent twice: a connection the server closed
            // under it is an unknown outcome, as for any client.
            let answer = match conn.send(&request, false).await {
                Ok(reply) => {
                    let limited_by = reply.limited_by.as_deref();
                    Answer::of_reply(reply.status, limited_by, conn.body(&reply))
                }
                Err(_) => Answer::unanswered(),
            };
            let error = match answer.status {
                200 => None,
                status => Some(
                    answer
                        .code
                        .clone()
                        .unwrap_or_else(|| format!("http_{status}")),
                ),
            };
            let attempt = Attempt {
                op: Op::Buy,
                buyer,
                sent,
                took: sent.elapsed(),
                answer,
                units: None,
            };
            ((conn, request), error, attempt)
        }
    };
    let states = states
        .into_iter()
        .map(|c| (c, Vec::with_capacity(256)))
        .collect();
    let (sample, attempts) = run_for(states, warmup, duration, op).await;
    Ok((sample, attempts, began))
}
