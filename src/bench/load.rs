//! Fixed-duration load: `n` workers each run one operation after another
//! until the deadline; only operations that start after the warm-up and
//! end before the deadline are counted.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::Script;

use crate::race::client::Target;
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

    /// Successful operations per second.
    pub fn ok_rate(&self) -> f64 {
        self.ok as f64 / self.window.as_secs_f64().max(1e-9)
    }

    /// Nearest-rank percentile, in ms.
    pub fn percentile_ms(&self, q: f64) -> f64 {
        crate::race::driver::percentile_ms(&self.latencies, q)
    }
}

/// Runs `op(seq)` from `n` workers (`seq` unique across them) for `warmup`
/// plus `duration`. `op` answers `None` on success or the error's name,
/// and a value kept for every operation, counted or not.
pub async fn run_for<T, F, Fut>(
    n: usize,
    warmup: Duration,
    duration: Duration,
    op: F,
) -> (Sample, Vec<T>)
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = (Option<String>, T)> + Send,
{
    let begin = Instant::now();
    let measured_from = begin + warmup;
    let end = measured_from + duration;
    let next = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..n.max(1))
        .map(|_| {
            let (op, next) = (op.clone(), next.clone());
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut kept = Vec::new();
                while Instant::now() < end {
                    let seq = next.fetch_add(1, Ordering::Relaxed);
                    let started = Instant::now();
                    let (error, value) = op(seq).await;
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

/// The HTTP path alone: `GET /healthz` through the gateway.
pub async fn http(
    target: &Target,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> anyhow::Result<Sample> {
    let url = format!("{}/healthz", target.base);
    let client = target.http.clone();
    let op = move |_| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let error = match client.get(&url).send().await {
                Ok(r) if r.status().is_success() => None,
                Ok(r) => Some(format!("http_{}", r.status().as_u16())),
                Err(_) => Some("transport".to_owned()),
            };
            (error, ())
        }
    };
    Ok(run_for(n, warmup, duration, op).await.0)
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
    let connections = Arc::new(connections);
    let op = move |seq: usize| {
        let (script, connections) = (script.clone(), connections.clone());
        async move {
            let mut conn = connections[seq % connections.len()].clone();
            let answer: redis::RedisResult<i64> = script.key(KEY).invoke_async(&mut conn).await;
            let error = match answer {
                Ok(1) => None,
                Ok(_) => Some("sold_out".to_owned()),
                Err(_) => Some("redis".to_owned()),
            };
            (error, ())
        }
    };
    let sample = run_for(n, warmup, duration, op).await.0;
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
    let op = {
        let pool = pool.clone();
        move |_| {
            let pool = pool.clone();
            async move {
                let done = sqlx::query(
                    "UPDATE products SET stock = stock - 1 WHERE id = $1 AND stock > 0",
                )
                .bind(product)
                .execute(&pool)
                .await;
                let error = match done {
                    Ok(r) if r.rows_affected() == 1 => None,
                    Ok(_) => Some("sold_out".to_owned()),
                    Err(_) => Some("postgres".to_owned()),
                };
                (error, ())
            }
        }
    };
    run_for(n, warmup, duration, op).await.0
}

/// Buys of `product` through the gateway, each from a new buyer; every
/// attempt is kept for the history check, with when the load began.
pub async fn buys(
    target: &Target,
    product: i64,
    n: usize,
    warmup: Duration,
    duration: Duration,
) -> (Sample, Vec<Attempt>, Instant) {
    let began = Instant::now();
    let prefix = format!("bench-{product}-{:06x}", rand::random::<u32>() & 0xff_ffff);
    let target = target.clone();
    let op = move |seq: usize| {
        let (target, buyer) = (target.clone(), format!("{prefix}-{seq}"));
        async move {
            let attempt = Attempt::make(&target, product, &buyer).await;
            let error = match attempt.answer.status {
                200 => None,
                _ => Some(
                    attempt
                        .answer
                        .code
                        .clone()
                        .unwrap_or_else(|| format!("http_{}", attempt.answer.status)),
                ),
            };
            (error, attempt)
        }
    };
    let (sample, attempts) = run_for(n, warmup, duration, op).await;
    (sample, attempts, began)
}
