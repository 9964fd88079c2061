//! The seam between selling and storing: what one buy carries through
//! every layer that sells ([`BuyCtx`]), what a store offers it
//! ([`Store`], one implementation per store in the `store` module), what a
//! database offers the strategies that sell with SQL ([`Rows`]), and what
//! a write did ([`Outcome`]).
//!
//! Here at the bottom, in one file, so that locks, stores, the per-buyer
//! limit and the strategies take them without knowing which strategy
//! called them or which store answers — and without an import cycle: the
//! context carries its store, and the store's methods take the context.
//!
//! The traits are object safe (`&dyn Store`, futures boxed): the store is
//! chosen at run time per product, and one allocation per call is noise
//! next to the network round trip each call makes.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use uuid::Uuid;

use crate::backends::conn::RedisConn;
use crate::backends::failure::BackendError;
use crate::backends::{Backends, Footprint};
use crate::model::order::Order;
use crate::model::order::state::{Tally, Tracked};
use crate::model::product::keys::RedisCell;
use crate::model::product::{Product, StoreKind};

/// Everything one buy needs.
pub struct BuyCtx<'a> {
    /// The instance's shared Redis connection (the buy path's lane):
    /// multiplexed, so every concurrent buy pipelines on it.
    pub redis: RedisConn,
    /// When the buy began: spinning locks back off by how long it has
    /// waited.
    pub started: Instant,
    /// The product being bought, as configured by its last reset.
    pub product: &'a Product,
    /// Where its stock and orders live, resolved once per reset.
    pub store: &'a dyn Store,
    /// The order that is recorded if the buy succeeds.
    pub order: &'a Order,
    /// Connections.
    pub backends: &'a Backends,
}

impl<'a> BuyCtx<'a> {
    /// The same product and connections, about `order`.
    pub fn for_order<'b>(&'b self, order: &'b Order) -> BuyCtx<'b>
    where
        'a: 'b,
    {
        BuyCtx {
            redis: self.redis.clone(),
            started: self.started,
            product: self.product,
            store: self.store,
            order,
            backends: self.backends,
        }
    }

    /// Sleeps `work_ms`: the simulated business work inside the critical
    /// section (or the transaction).
    pub async fn work(&self) {
        let ms = self.product.settings.work_ms;
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// The database whose row holds the stock, for a strategy that sells
    /// with SQL; an error for a product laid out elsewhere (a reset
    /// refuses such a store, so only a corrupt product gets here).
    pub fn rows(&self) -> Result<&'static dyn Rows, BackendError> {
        self.store.rows().ok_or_else(|| {
            BackendError::Corrupt(format!(
                "product {} is stored in {}, which has no row to sell with SQL",
                self.product.id,
                self.store.kind().as_str()
            ))
        })
    }
}

/// What one buy did: the answer of a selling script or a database write,
/// and of the strategy around it — one type from the store up to the
/// sale, which translates it once into the contract's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Stock written and order recorded, atomically.
    Sold {
        /// The product's stock right after this sale, when the write was
        /// to the product's one counter (not a segment): the unit this
        /// buyer got, which a history check holds unique.
        left: Option<i64>,
    },
    /// Nothing written: no stock left.
    SoldOut,
    /// Nothing written: the product was reset since the buy began.
    Reset,
    /// Nothing written: the buyer already holds `per_user_limit` units.
    LimitReached,
    /// Nothing written: a holder with a newer fencing token touched the
    /// stock since this one read it.
    Fenced,
    /// Nothing written: the strategy gave up (lock not acquired in time,
    /// retries exhausted); the client may retry after `retry_after`.
    Busy {
        /// Why, for the error message.
        reason: &'static str,
        /// The hint sent as `Retry-After`.
        retry_after: Duration,
    },
}

impl Outcome {
    /// A `busy` outcome with a one-second retry hint.
    pub fn busy(reason: &'static str) -> Self {
        Self::Busy {
            reason,
            retry_after: Duration::from_secs(1),
        }
    }

    /// The outcome's name in metrics and logs: a reset or fenced write is
    /// `busy` to the buyer.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Sold { .. } => "sold",
            Self::SoldOut => "sold_out",
            Self::LimitReached => "limit_reached",
            Self::Reset | Self::Fenced | Self::Busy { .. } => "busy",
        }
    }
}

/// Units an admin adds to a live sale, without a reset: added once per
/// `id`, so an admin who retries after a timeout adds nothing twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Addition {
    /// Names the addition; decided in the same atomic step as the units.
    pub id: Uuid,
    /// Units added (at least 1).
    pub units: i64,
}

/// What adding an [`Addition`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The units are on sale now, recorded with the addition.
    Now,
    /// This addition was made before: nothing more was added.
    Before,
    /// Nothing added: the product was reset since (its epoch moved).
    Reset,
}

/// A future a [`Store`] returns.
pub type StoreFuture<'a, T> = BoxFuture<'a, Result<T, BackendError>>;

/// A stock as reconciliation reads it: the value, and how many times it
/// was written — every sale, put-back, wave and repair adds one in the
/// same atomic step as its write (a Redis script's `INCR` beside the
/// counter; the row's `version`, bumped by a trigger on every update in
/// PostgreSQL and by every statement that writes MySQL's stock). A
/// value can come back to what it was; the moves cannot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mark {
    /// The stock left (the sum of the counters, or the row's).
    pub remaining: i64,
    /// Writes so far in this reset (summed over the counters).
    pub moves: i64,
}

/// Where one product's stock and orders live: the seam between selling
/// and storing. See the module header.
pub trait Store: Send + Sync {
    /// Which store this is (the ledger and `GET /stock/{id}` name it).
    fn kind(&self) -> StoreKind;

    /// Where this store's orders end up, for a history check to read:
    /// a Redis sale's order is moved into PostgreSQL by the order writer.
    fn orders_in(&self) -> StoreKind;

    /// The database whose row holds the stock, for the strategies that
    /// sell with SQL (`None`: the stock is not a row).
    fn rows(&self) -> Option<&'static dyn Rows>;

    /// The database where this store's lock rows live (`db-lock-table`):
    /// the one that holds the stock, or PostgreSQL for a Redis stock.
    fn lock_table(&self) -> &'static dyn Rows;

    /// How long a waiter for a lock waits before re-reading the stock: a
    /// database read costs a pooled connection the holder may need, so
    /// waiters on a database re-read ten times less often than on Redis.
    fn recheck_every(&self) -> Duration;

    /// Reads counter `cell` (0 for a row), registering `fence` as the
    /// newest token if given.
    fn read<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        fence: Option<u64>,
    ) -> StoreFuture<'a, i64>;

    /// Writes `new_stock` to counter `cell`, counts the unit against the
    /// buyer's limit and records the order, in one atomic step.
    fn write<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        new_stock: i64,
        fence: Option<u64>,
    ) -> StoreFuture<'a, Outcome>;

    /// The Redis counters holding the stock (none for a database row):
    /// what a reset sets, a footprint clears and `GET /stock/{id}` places.
    fn cells(&self) -> &[RedisCell] {
        &[]
    }

    /// The units the buyer holds (a hint read before queueing for a lock;
    /// the atomic step decides).
    fn bought<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, i64>;

    /// The order `order_id` of `product`, wherever this store has put it
    /// so far: what a retry with an Idempotency-Key replays.
    fn find_order<'a>(
        &'a self,
        backends: &'a Backends,
        redis: &'a mut RedisConn,
        product: &'a Product,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Order>>;

    /// Puts waves `2..=due` on sale, atomically and idempotently per
    /// counter, in this reset only.
    fn release<'a>(
        &'a self,
        backends: &'a Backends,
        redis: &'a mut RedisConn,
        product: &'a Product,
        due: u32,
    ) -> StoreFuture<'a, ()>;

    /// How many waves each counter holds.
    fn waves_held<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
    ) -> StoreFuture<'a, Vec<u32>>;

    /// The ledger's count of this reset's orders: (recorded in the
    /// orders table, still waiting in a stream). `in_stream`: the
    /// product's order ids read from the streams just before.
    fn orders<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)>;

    /// The stock the store holds now (the sum of its counters, or the
    /// row), with how often it was written.
    fn mark<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Mark>;

    /// What this store keeps for the product besides the product's own
    /// rows (counters, wave markers, fences): a reset clears it. Nothing
    /// for a stock in a database row, whose reset rewrites the row.
    fn footprint(&self, _product: &Product) -> Footprint {
        Footprint::default()
    }

    /// This store's part of a reset, run before PostgreSQL's reset
    /// transaction commits (so if it fails, the whole reset fails):
    /// the product's stock laid out here and what it left in the other
    /// databases removed. `stale`: everything any strategy kept for it.
    fn lay_out<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()>;

    /// The database that keeps this store's orders and their states.
    fn book(&self) -> &'static dyn Book;

    /// Which counter the unit of order `id`, or the units of addition
    /// `id`, go to (0: the one counter or the row): spread over the
    /// segments by id, so a retry of the same give-back or addition finds
    /// the same counter (and its marker).
    fn cell_of(&self, _id: Uuid) -> usize {
        0
    }

    /// Adds `addition`'s units to counter `cell` and records the
    /// addition beside it, in one atomic step, once per addition id and
    /// in this reset only: the ledger reads the record
    /// ([`Store::added`]), so what was put on sale and what the ledger
    /// measures against never disagree. A locked strategy calls it under
    /// its lock, as [`Store::restock`].
    fn add<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        addition: Addition,
    ) -> StoreFuture<'a, Added>;

    /// The units every addition of this reset put on sale.
    fn added<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, i64>;

    /// Puts the units of `orders` back on counter `cell` and takes each
    /// off its buyer's count, in this reset only; `ctx` names the product
    /// and the connections (its own order is not one of `orders`). With
    /// `once`, only the orders whose unit was not put back before —
    /// decided in the same atomic step as the put-back (a marker beside a
    /// Redis counter; each order's `expired → returned` in the row's
    /// transaction). How many went back. A locked strategy calls it
    /// under its lock: the critical section writes an absolute value it
    /// read, and would overwrite a put-back that landed between its read
    /// and its write.
    fn restock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        cell: usize,
        orders: &'a [Order],
        once: bool,
    ) -> StoreFuture<'a, usize>;

    /// Reconciliation's repair: sets the stock to `stock` if nothing
    /// wrote it since `expected` was read (its moves, not its value: a
    /// give-back then a sale leave the value as it was and the truth
    /// changed), in this reset; a Redis counter that vanished with its epoch (a Redis that
    /// came back empty) is laid out again. False when the stock moved.
    /// Several counters (segments) are set to even shares of `stock`,
    /// which is safe only under every segment's lock.
    fn set_stock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        expected: Mark,
        stock: i64,
    ) -> StoreFuture<'a, bool>;
}

/// Which holds a reaper asks a [`Book`] for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Holds made before the cutoff id, still holding.
    Overdue(Uuid),
    /// Expired orders whose unit is not back yet.
    Owed,
}

/// The orders' states, in the database that keeps the orders (PostgreSQL,
/// or MySQL for a product stored there): every transition is one
/// conditional `UPDATE`, so of two racing transitions exactly one wins.
pub trait Book: Send + Sync {
    /// The order `order_id` with its state, if this database has it.
    fn find<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
    ) -> StoreFuture<'a, Option<Tracked>>;

    /// held → paid at `now_ms`, if the order still holds its unit and, with
    /// `payable_from`, was made at or after that id (not overdue). True if
    /// this payment won.
    fn pay<'a>(
        &'a self,
        backends: &'a Backends,
        order_id: Uuid,
        payable_from: Option<Uuid>,
        now_ms: i64,
    ) -> StoreFuture<'a, bool>;

    /// held → expired for each of `order_ids` still held, in one
    /// statement: the ids this expiry won (a payment or another expiry
    /// won the others).
    fn expire<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
    ) -> StoreFuture<'a, Vec<Uuid>>;

    /// Marks `order_ids` `returned`, in one statement: from `expired`
    /// only, or, `blindly`, from any state (the naive job's mark).
    fn returned<'a>(
        &'a self,
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()>;

    /// Up to `limit` of the product's orders that are `due`, oldest first.
    fn due<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        due: Due,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>>;

    /// The delay queue's claim: up to `limit` holds made before `cutoff`,
    /// locked with `SKIP LOCKED` (so reapers on several instances take
    /// different ones) and moved held → expired in the same statement.
    fn claim<'a>(
        &'a self,
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>>;

    /// The product's orders of this reset, by state.
    fn tally<'a>(&'a self, backends: &'a Backends, product: &'a Product) -> StoreFuture<'a, Tally>;
}

/// One database's way of running each database strategy's statements on
/// the product's row. Every write also counts the unit against the
/// buyer's limit and inserts the order, in the same transaction.
pub trait Rows: Send + Sync {
    /// `db-atomic`: the conditional decrement `stock > 0` with the order,
    /// in one round trip where the settings allow (no `work_ms`); with
    /// work, in a transaction that holds the row lock through it.
    fn atomic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome>;

    /// `db-pessimistic`: `SELECT … FOR UPDATE`, the work, the decrement
    /// and the order, then COMMIT.
    fn pessimistic<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome>;

    /// `db-optimistic`'s read: the stock and its version, `None` once the
    /// product was reset.
    fn versioned<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<(i64, i64)>>;

    /// `db-optimistic`'s write: the decrement only at `version`, with the
    /// order; `None` when somebody wrote since the read.
    fn compare_and_set<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        version: i64,
    ) -> StoreFuture<'a, Option<Outcome>>;

    /// `db-transaction`'s one attempt: a REPEATABLE READ transaction of a
    /// plain read, the work, a write of the value read minus one and the
    /// order; `None` when the database refused it as a serialization
    /// failure (nothing written: run it again).
    fn transaction<'a>(&'a self, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<Outcome>>;

    /// `db-lock-table`: one try to take lock `name` as `owner` (a free
    /// row, or one older than its lease).
    fn take_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, bool>;

    /// `db-lock-table`: releases lock `name` if `owner` still holds it.
    fn drop_lock<'a>(
        &'a self,
        ctx: &'a BuyCtx<'a>,
        name: &'a str,
        owner: &'a str,
    ) -> StoreFuture<'a, ()>;
}
