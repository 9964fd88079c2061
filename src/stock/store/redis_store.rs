//! The Redis store: a counter key per product (or per segment), written
//! together with the order's `XADD` by one script; the order writer moves
//! the streams into PostgreSQL, so an order is in one of the two (or,
//! briefly, in both).

use std::marker::PhantomData;
use std::sync::LazyLock;
use std::time::Duration;

use redis::{AsyncCommands, Script};
use uuid::Uuid;

use super::dialect::Dialect;
use super::mysql;
use super::postgres::Pg;
use super::script;
use super::sql_book::SqlBook;
use super::sql_rows::SqlRows;
use super::sql_store::find_order;
use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::order::Order;
use crate::model::order::stream::find_in_stream;
use crate::model::product::keys::RedisCell;
use crate::model::product::shares::{split, through};
use crate::model::product::{Product, StoreKind, keys};
use crate::model::seam::{Added, Addition, Book, BuyCtx, Mark, Outcome, Rows, Store, StoreFuture};
use crate::stock::limit;

/// KEYS: stock, fence-seen. ARGV: fencing token.
/// Records the token as the newest to touch the stock, returns the stock.
static READ_FENCED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local stock_key, fence_key, fence = KEYS[1], KEYS[2], tonumber(ARGV[1]) \
         local seen = tonumber(redis.call('GET', fence_key) or '0') \
         if fence > seen then redis.call('SET', fence_key, fence) end \
         return tonumber(redis.call('GET', stock_key) or '0')",
    )
});

/// Writes the new stock unless the product was reset, a newer fencing
/// token has read the stock, or the buyer is at the limit.
static WRITE: LazyLock<Script> = LazyLock::new(|| {
    script::selling(
        "{check_epoch} \
         if fence ~= '' and tonumber(fence) < tonumber(redis.call('GET', fence_key) or '0') \
         then return {fenced} end \
         {check_limit} \
         redis.call('SET', stock_key, new_stock) \
         local left = tonumber(new_stock) \
         {record} \
         return {sold}",
    )
});

/// KEYS: stock, waves held, epoch, moves.
/// Adds to a counter what waves `held + 1 ..= due` release, if the counter
/// holds fewer, in this reset. `-1`: the counter belongs to another reset.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[3]) ~= ARGV[1] then return -1 end \
         local held = tonumber(redis.call('GET', KEYS[2]) or '1') \
         local due = tonumber(ARGV[2]) \
         if held >= due then return 0 end \
         redis.call('INCRBY', KEYS[1], tonumber(ARGV[3 + due]) - tonumber(ARGV[3 + held])) \
         redis.call('INCR', KEYS[4]) \
         redis.call('SET', KEYS[2], due) \
         return 1",
    )
});

/// KEYS: stock, epoch, buyer counts, put-back marker, moves. ARGV: epoch, order
/// id, buyer, whether the counter counts buyers, `once`. Puts one unit
/// back in this reset, and (`once`) only for an order the marker set does
/// not hold yet: 1 when put back, 0 when not.
static RESTOCK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end \
         if ARGV[5] == '1' and redis.call('SADD', KEYS[4], ARGV[2]) == 0 then return 0 end \
         redis.call('INCR', KEYS[1]) \
         redis.call('INCR', KEYS[5]) \
         if ARGV[4] == '1' and tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0') > 0 \
         and redis.call('HINCRBY', KEYS[3], ARGV[3], -1) <= 0 \
         then redis.call('HDEL', KEYS[3], ARGV[3]) end \
         return 1",
    )
});

/// KEYS: stock, epoch, additions, moves. ARGV: epoch, addition id, units.
/// Adds the units to the counter and records the addition, once per id,
/// in this reset: 1 when added now, 0 when added before, -1 when the
/// product was reset.
static ADD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end \
         if redis.call('HSETNX', KEYS[3], ARGV[2], ARGV[3]) == 0 then return 0 end \
         redis.call('INCRBY', KEYS[1], ARGV[3]) \
         redis.call('INCR', KEYS[4]) \
         return 1",
    )
});

/// KEYS: stock, epoch, moves. ARGV: expected moves, new stock, epoch.
/// Sets the stock if nothing wrote it since its moves were read (the
/// value alone could have moved and come back) and the epoch is this
/// reset's (or gone with the rest of Redis's data, when it is written
/// again): 1, else 0.
static SET_IF: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if tonumber(redis.call('GET', KEYS[3]) or '0') ~= tonumber(ARGV[1]) then return 0 end \
         local epoch = redis.call('GET', KEYS[2]) \
         if epoch and epoch ~= ARGV[3] then return 0 end \
         redis.call('SET', KEYS[1], ARGV[2]) \
         redis.call('INCR', KEYS[3]) \
         if not epoch then redis.call('SET', KEYS[2], ARGV[3]) end \
         return 1",
    )
});

/// A product's stock in Redis: its counters (one, or one per segment),
/// each in its place.
pub struct RedisStore {
    /// The counters; the stock is split evenly over them.
    cells: Vec<RedisCell>,
}

impl RedisStore {
    /// The stock in `cells`.
    pub fn new(cells: Vec<RedisCell>) -> Self {
        Self { cells }
    }

    fn cell(&self, cell: usize) -> Result<&RedisCell, BackendError> {
        self.cells
            .get(cell)
            .ok_or_else(|| BackendError::Corrupt(format!("no stock counter {cell}")))
    }

    /// Every order stream the counters' sales append to, each once.
    fn streams(&self, product: &Product) -> Vec<String> {
        let mut streams = vec![keys::orders(product.id)];
        for cell in &self.cells {
            let stream = cell.place.orders();
            if !streams.contains(&stream) {
                streams.push(stream);
            }
        }
        streams
    }
}

impl Store for RedisStore {
    fn kind(&self) -> StoreKind {
        StoreKind::Redis
    }

    fn orders_in(&self) -> StoreKind {
        StoreKind::Postgres
    }

    fn cells(&self) -> &[RedisCell] {
        &self.cells
    }

    fn rows(&self) -> Option<&'static dyn Rows> {
        None
    }

    fn lock_table(&self) -> &'static dyn Rows {
        &SqlRows::<Pg>(PhantomData)
    }

    fn recheck_every(&self) -> Duration {
        Duration::from_millis(25)
    }

    fn read<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        fence: Option<u64>,
    ) -> StoreFuture<'a, i64> {
        Box::pin(async move { read(ctx, self.cell(cell)?, fence).await })
    }

    fn write<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        new_stock: i64,
        fence: Option<u64>,
    ) -> StoreFuture<'a, Outcome> {
        Box::pin(
            async move { script::run(&WRITE, ctx, self.cell(cell)?, Some(new_stock), fence).await },
        )
    }

    fn bought<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let held: Option<i64> = ctx
                .redis
                .clone()
                .hget(keys::buyers(ctx.product.id), &ctx.order.user_id)
                .await?;
            Ok(held.unwrap_or(0))
        })
    }

    fn find_order<'a>(
        &'a self,
        backends: &'a Backends,
        redis: &'a mut RedisConn,
        product: &'a Product,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Order>> {
        Box::pin(async move {
            // The table first: an order leaves the stream only once it is
            // stored, so one moving between the two reads is found there.
            if let Some(order) = find_order::<Pg>(backends, order_id).await? {
                return Ok(Some(order));
            }
            for stream in self.streams(product) {
                if let Some(order) = find_in_stream(redis, &stream, order_id).await? {
                    return Ok(Some(order));
                }
            }
            Ok(None)
        })
    }

    fn release<'a>(
        &'a self,
        _backends: &'a Backends,
        redis: &'a mut RedisConn,
        product: &'a Product,
        due: u32,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let through = through(product.initial, product.settings.waves, self.cells.len());
            for (cell, through) in self.cells.iter().zip(through) {
                let _: i64 = RELEASE
                    .key(&cell.key)
                    .key(cell.waves_key())
                    .key(cell.place.epoch())
                    .key(cell.moves_key())
                    .arg(product.epoch)
                    .arg(due)
                    .arg(&through)
                    .invoke_async(redis)
                    .await?;
            }
            Ok(())
        })
    }

    fn waves_held<'a>(
        &'a self,
        backends: &'a Backends,
        _product: &'a Product,
    ) -> StoreFuture<'a, Vec<u32>> {
        Box::pin(async move {
            let keys: Vec<String> = self.cells.iter().map(RedisCell::waves_key).collect();
            let values = backends.redis.get().await?.get_each::<i64>(&keys).await?;
            Ok(values
                .into_iter()
                .map(|v| v.map_or(1, |w| w.max(1) as u32))
                .collect())
        })
    }

    fn orders<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)> {
        Pg::orders(backends, product, in_stream)
    }

    /// Each counter with its moves in one read (they share a slot).
    /// The cells are read at once, as `remaining` was before (the ledger
    /// reads this for every product, every second the live page is open).
    fn mark<'a>(&'a self, backends: &'a Backends, _product: &'a Product) -> StoreFuture<'a, Mark> {
        Box::pin(async move {
            let conn = backends.redis.get().await?;
            let reads = self.cells.iter().map(|cell| {
                let mut conn = (*conn).clone();
                async move {
                    redis::cmd("MGET")
                        .arg(&cell.key)
                        .arg(cell.moves_key())
                        .query_async::<(Option<i64>, Option<i64>)>(&mut conn)
                        .await
                }
            });
            let mut mark = Mark::default();
            for (left, moves) in futures::future::try_join_all(reads).await? {
                mark.remaining += left.unwrap_or(0);
                mark.moves += moves.unwrap_or(0);
            }
            Ok(mark)
        })
    }

    fn footprint(&self, product: &Product) -> Footprint {
        let counters = self.cells.iter().map(|c| c.key.clone());
        let markers = self.cells.iter().map(RedisCell::waves_key);
        let put_back = self.cells.iter().map(RedisCell::restocked_key);
        let moves = self.cells.iter().map(RedisCell::moves_key);
        let added = self.cells.iter().map(|c| c.added_key(product.epoch));
        Footprint::redis(
            [keys::fence_seen(product.id)]
                .into_iter()
                .chain(counters)
                .chain(markers)
                .chain(put_back)
                .chain(moves)
                .chain(added),
        )
    }

    fn book(&self) -> &'static dyn Book {
        &SqlBook::<Pg>(PhantomData)
    }

    fn cell_of(&self, id: Uuid) -> usize {
        (id.as_u128() % self.cells.len().max(1) as u128) as usize
    }

    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        orders: &'a [Order],
        once: bool,
    ) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let cell = self.cell(cell)?;
            let counts = cell.counts_buyer && ctx.product.settings.per_user_limit > 0;
            // One script per order, each with its marker, all sent at
            // once: they pipeline on the multiplexed connection.
            let puts = orders.iter().map(|order| {
                let mut redis = ctx.redis.clone();
                async move {
                    let put: i64 = RESTOCK
                        .key(&cell.key)
                        .key(cell.place.epoch())
                        .key(cell.place.buyers())
                        .key(cell.restocked_key())
                        .key(cell.moves_key())
                        .arg(ctx.product.epoch)
                        .arg(order.order_id.to_string())
                        .arg(&order.user_id)
                        .arg(if counts { "1" } else { "0" })
                        .arg(if once { "1" } else { "0" })
                        .invoke_async(&mut redis)
                        .await?;
                    if put == 1 && !cell.counts_buyer {
                        // A segment away from home: the buyer was counted
                        // at home.
                        limit::give_back(&ctx.for_order(order)).await;
                    }
                    Ok::<_, BackendError>(usize::from(put == 1))
                }
            });
            let back = futures::future::try_join_all(puts).await?.into_iter().sum();
            Ok(back)
        })
    }

    fn add<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        addition: Addition,
    ) -> StoreFuture<'a, Added> {
        Box::pin(async move {
            let cell = self.cell(cell)?;
            let added: i64 = ADD
                .key(&cell.key)
                .key(cell.place.epoch())
                .key(cell.added_key(ctx.product.epoch))
                .key(cell.moves_key())
                .arg(ctx.product.epoch)
                .arg(addition.id.to_string())
                .arg(addition.units)
                .invoke_async(&mut ctx.redis.clone())
                .await?;
            Ok(match added {
                1 => Added::Now,
                0 => Added::Before,
                _ => Added::Reset,
            })
        })
    }

    /// Every counter's additions, read at once (on a cluster they live on
    /// different masters).
    fn added<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, i64> {
        Box::pin(async move {
            let conn = backends.redis.get().await?;
            let reads = self.cells.iter().map(|cell| {
                let mut conn = (*conn).clone();
                async move {
                    conn.hvals::<_, Vec<i64>>(cell.added_key(product.epoch))
                        .await
                }
            });
            let added = futures::future::try_join_all(reads).await?;
            Ok(added.iter().flatten().sum())
        })
    }

    fn set_stock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            if let [cell] = self.cells.as_slice() {
                return set_if(ctx, cell, expected.moves, stock).await;
            }
            // Several counters: nothing moves them while the caller holds
            // every segment's lock, so read their moves, then set each.
            let keys: Vec<String> = self.cells.iter().map(RedisCell::moves_key).collect();
            let moves: Vec<i64> = ctx
                .redis
                .get_each::<i64>(&keys)
                .await?
                .into_iter()
                .map(|v| v.unwrap_or(0))
                .collect();
            if moves.iter().sum::<i64>() != expected.moves {
                return Ok(false);
            }
            let shares = split(stock, self.cells.len());
            let mut set = true;
            for ((cell, moves), share) in self.cells.iter().zip(moves).zip(shares) {
                set &= set_if(ctx, cell, moves, share).await?;
            }
            if !set {
                return Err(BackendError::Corrupt(
                    "a counter moved while every segment was locked".into(),
                ));
            }
            Ok(true)
        })
    }

    /// The counters are set by the reset's Redis pipeline, after
    /// PostgreSQL commits (from [`Store::cells`]); here only what the
    /// product left in MySQL goes.
    fn lay_out<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()> {
        Box::pin(mysql::leave(backends, product, stale))
    }
}

/// [`SET_IF`] on one counter: `share` if its moves are still `moves`.
async fn set_if(
    ctx: &BuyCtx<'_>,
    cell: &RedisCell,
    moves: i64,
    share: i64,
) -> Result<bool, BackendError> {
    let set: i64 = SET_IF
        .key(&cell.key)
        .key(cell.place.epoch())
        .key(cell.moves_key())
        .arg(moves)
        .arg(share)
        .arg(ctx.product.epoch)
        .invoke_async(&mut ctx.redis.clone())
        .await?;
    Ok(set == 1)
}

/// The counter (0 when missing), registering `fence` when given.
pub async fn read(
    ctx: &BuyCtx<'_>,
    cell: &RedisCell,
    fence: Option<u64>,
) -> Result<i64, BackendError> {
    let mut conn = ctx.redis.clone();
    match fence {
        None => {
            let stock: Option<i64> = conn.get(&cell.key).await?;
            Ok(stock.unwrap_or(0))
        }
        Some(token) => Ok(READ_FENCED
            .key(&cell.key)
            .key(cell.place.fence_seen())
            .arg(token)
            .invoke_async(&mut conn)
            .await?),
    }
}
