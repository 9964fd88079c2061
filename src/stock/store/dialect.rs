//! What the SQL stores ([`super::sql_store`], [`super::sql_rows`],
//! [`super::sql_book`]) ask of a database: its statements, its pool, and
//! the few steps its SQL cannot say the way the other's does — so that
//! each flow (the order of the reads, checks, writes and the commit) is
//! written once for PostgreSQL and MySQL, and a fix to one database's
//! flow is a fix to both.
//!
//! Binding and fetching go through the dialect ([`Dialect::bind`], …)
//! rather than through sqlx's generics: sqlx cannot say "every database
//! encodes an `i64`" for a generic database, only for a named one, so the
//! dialect — which names its own — does the binding, a few lines each.

use sqlx::mysql::{MySql, MySqlRow};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{Database, Encode, FromRow, Pool, Transaction, Type};
use uuid::Uuid;

use crate::backends::failure::{AtCommit, BackendError};
use crate::backends::{Backends, Footprint};
use crate::model::order::Order;
use crate::model::product::{Product, StoreKind};
use crate::model::seam::{BuyCtx, Outcome, StoreFuture};

/// A dialect's connection: what a transaction derefs to.
pub type Conn<D> = <<D as Dialect>::Db as Database>::Connection;

/// A statement of dialect `D`, as sqlx builds it.
pub type Query<'q, D> =
    sqlx::query::Query<'q, <D as Dialect>::Db, <<D as Dialect>::Db as Database>::Arguments>;

/// A value both databases bind: what the shared flows may bind.
pub trait Param:
    for<'t> Encode<'t, Postgres> + Type<Postgres> + for<'t> Encode<'t, MySql> + Type<MySql> + Send
{
}

impl<T> Param for T where
    T: for<'t> Encode<'t, Postgres>
        + Type<Postgres>
        + for<'t> Encode<'t, MySql>
        + Type<MySql>
        + Send
{
}

/// A row both databases decode: what the shared flows may fetch.
pub trait Fetch:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, MySqlRow> + Send + Unpin + 'static
{
}

impl<T> Fetch for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, MySqlRow> + Send + Unpin + 'static
{
}

/// The statements whose shape both databases share, each in the
/// database's own words, with its parameters in the same order in both
/// (PostgreSQL's `$n` numbered as MySQL's `?` fall): the shared flows bind
/// them once. MySQL's writes of `products` bump `version` themselves;
/// PostgreSQL's trigger does it (migration 0007).
pub struct Statements {
    /// The stock, this reset: (id, epoch).
    pub read: &'static str,
    /// Records a fencing token and hands the stock back through
    /// [`Dialect::returning`]: (token, id, epoch).
    pub fence: &'static str,
    /// A locked strategy's write, refused to an older token: (stock, id,
    /// epoch, token, token).
    pub write: &'static str,
    /// The buyer's count: (id, epoch, user).
    pub bought: &'static str,
    /// An order's columns: (order id).
    pub find_order: &'static str,
    /// The waves the row holds: (id).
    pub waves_held: &'static str,
    /// The stock and its version, whatever the reset: (id).
    pub mark: &'static str,
    /// Reconciliation's repair at a version: (stock, id, epoch, version).
    pub set_stock: &'static str,
    /// Units put back, the version moved: (units, id, epoch).
    pub put_back: &'static str,
    /// Records an addition, nothing if its id was recorded before: (id,
    /// epoch, addition id, units).
    pub add: &'static str,
    /// The units this reset's additions put on sale: (id, epoch).
    pub added: &'static str,
    /// `db-pessimistic`'s locking read: (id, epoch).
    pub for_update: &'static str,
    /// `db-pessimistic`'s decrement under the row lock: (id).
    pub take_one: &'static str,
    /// `db-optimistic`'s read: (id, epoch).
    pub versioned: &'static str,
    /// `db-transaction`'s BEGIN, at REPEATABLE READ.
    pub repeatable_read: &'static str,
    /// `db-transaction`'s write of the value it read minus one: (stock, id).
    pub set_left: &'static str,
    /// Takes a free lock row; one row affected when taken: (name, owner,
    /// lease).
    pub lock_insert: &'static str,
    /// Takes over a lock row past its lease: (owner, lease, name).
    pub lock_take_over: &'static str,
    /// Releases a lock row the owner still holds: (name, owner).
    pub lock_drop: &'static str,
    /// The order's INSERT: [`crate::model::order::order_columns`].
    pub insert_order: &'static str,
    /// An order with its state: (order id).
    pub find: &'static str,
    /// held → paid: (paid, now, order id, payable from, payable from).
    pub pay: &'static str,
    /// A product's orders in a state, oldest first: (id, epoch, state,
    /// cutoff, cutoff, limit).
    pub due: &'static str,
    /// The orders by state: (expired, returned, returned, expired,
    /// returned, id, epoch).
    pub tally: &'static str,
}

/// One database the SQL stores run on. The shared flows call these; each
/// is the part of a step that the database's SQL says its own way.
pub trait Dialect: Send + Sync + Sized + 'static {
    /// sqlx's database.
    type Db: Database;
    /// Which store a product in this database is.
    const KIND: StoreKind;
    /// The statements both databases share the shape of.
    const SQL: Statements;

    /// The pool, or why this instance has none.
    fn pool(backends: &Backends) -> Result<&Pool<Self::Db>, BackendError>;
    /// The pool, if this instance has one.
    fn configured(backends: &Backends) -> Option<&Pool<Self::Db>>;

    /// Binds `value` to the next parameter.
    fn bind<'q, T: Param>(query: Query<'q, Self>, value: T) -> Query<'q, Self>;
    /// Runs `query`: the rows it matched.
    fn execute<'a>(query: Query<'a, Self>, on: &'a mut Conn<Self>) -> StoreFuture<'a, u64>;
    /// Runs `query`: its rows.
    fn fetch_all<'a, T: Fetch>(
        query: Query<'a, Self>,
        on: &'a mut Conn<Self>,
    ) -> StoreFuture<'a, Vec<T>>;
    /// Runs an `UPDATE` that hands one number back, `None` when it matched
    /// no row: PostgreSQL's `RETURNING`; MySQL's has none, so its
    /// statement sets `LAST_INSERT_ID(expr)`, which comes back in the OK
    /// packet — one round trip either way.
    fn returning<'a>(
        query: Query<'a, Self>,
        on: &'a mut Conn<Self>,
    ) -> StoreFuture<'a, Option<i64>>;

    /// The database rolled the statement's whole transaction back on its
    /// own (InnoDB's deadlock victim, its lock wait timeout): nothing of
    /// it happened, and it is run again ([`again`]). Never on PostgreSQL.
    fn rolled_back(error: &BackendError) -> bool;
    /// `db-transaction`'s refusal: PostgreSQL's serialization failure at
    /// REPEATABLE READ (nothing written: the strategy tries again).
    /// InnoDB never refuses: its write lands on the newest row.
    fn serialization_failure(error: &BackendError) -> bool;

    /// Counts the buyer's unit inside the caller's transaction (see
    /// [`crate::stock::limit`]); false: at the limit, roll back.
    fn claim<'a>(on: &'a mut Conn<Self>, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, bool>;
    /// In the caller's transaction: the decrement `stock > 0` and the
    /// order; the stock left, `None` when sold out.
    fn sell<'a>(on: &'a mut Conn<Self>, ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Option<i64>>;
    /// `db-atomic` without work: the sale (the limit included) in one
    /// round trip, its own transaction.
    fn sell_now<'a>(ctx: &'a BuyCtx<'a>) -> StoreFuture<'a, Outcome>;
    /// `db-optimistic`'s write: see [`crate::model::seam::Rows::compare_and_set`].
    fn compare_and_set<'a>(ctx: &'a BuyCtx<'a>, version: i64) -> StoreFuture<'a, Option<Outcome>>;

    /// The statement that puts waves `2..=due` on sale in the row, once:
    /// the cumulative shares bound as the database can index them.
    fn release<'q>(product: &Product, due: u32) -> Stmt<'q, Self>;
    /// The ledger's count: see [`crate::model::seam::Store::orders`].
    fn orders<'a>(
        backends: &'a Backends,
        product: &'a Product,
        in_stream: &'a [Uuid],
    ) -> StoreFuture<'a, (i64, i64)>;
    /// The store's part of a reset: see [`crate::model::seam::Store::lay_out`].
    fn lay_out<'a>(
        backends: &'a Backends,
        product: &'a Product,
        stale: &'a Footprint,
    ) -> StoreFuture<'a, ()>;

    /// In the caller's transaction: marks those of `orders` still
    /// `expired` as `returned`; their buyers.
    fn mark_returned<'a>(
        on: &'a mut Conn<Self>,
        orders: &'a [Order],
    ) -> StoreFuture<'a, Vec<String>>;
    /// In the caller's transaction: one unit off each of `buyers`' counts
    /// (a buyer named twice, two), never below zero.
    fn uncount<'a>(
        on: &'a mut Conn<Self>,
        product: &'a Product,
        buyers: &'a [String],
    ) -> StoreFuture<'a, ()>;
    /// held → expired for those of `order_ids` still held (not empty).
    fn expire<'a>(backends: &'a Backends, order_ids: &'a [Uuid]) -> StoreFuture<'a, Vec<Uuid>>;
    /// Marks `order_ids` (not empty) `returned`: see [`crate::model::seam::Book::returned`].
    fn returned<'a>(
        backends: &'a Backends,
        order_ids: &'a [Uuid],
        blindly: bool,
    ) -> StoreFuture<'a, ()>;
    /// The delay queue's claim: see [`crate::model::seam::Book::claim`].
    fn claim_due<'a>(
        backends: &'a Backends,
        product: &'a Product,
        cutoff: Uuid,
        limit: i64,
    ) -> StoreFuture<'a, Vec<Order>>;
}

/// A statement of dialect `D` being bound, `bind` chaining as sqlx's.
pub struct Stmt<'q, D: Dialect>(pub Query<'q, D>);

impl<'q, D: Dialect> Stmt<'q, D> {
    /// `sql` with nothing bound yet.
    pub fn new(sql: &'static str) -> Self {
        Self(sqlx::query(sql))
    }

    /// `value` bound to the next parameter.
    pub fn bind<T: Param>(self, value: T) -> Self {
        Self(D::bind(self.0, value))
    }

    /// Runs it: the rows it matched.
    pub async fn run(self, on: &mut Conn<D>) -> Result<u64, BackendError> {
        D::execute(self.0, on).await
    }

    /// Runs it: its first row (each statement that asks matches one row
    /// at most).
    pub async fn optional<T: Fetch>(self, on: &mut Conn<D>) -> Result<Option<T>, BackendError> {
        Ok(D::fetch_all(self.0, on).await?.into_iter().next())
    }

    /// Runs it: its rows.
    pub async fn all<T: Fetch>(self, on: &mut Conn<D>) -> Result<Vec<T>, BackendError> {
        D::fetch_all(self.0, on).await
    }

    /// Runs it: the number it hands back ([`Dialect::returning`]).
    pub async fn returning(self, on: &mut Conn<D>) -> Result<Option<i64>, BackendError> {
        D::returning(self.0, on).await
    }
}

/// One of the pool's connections, for a statement outside a transaction
/// (what sqlx's pool does when it runs one itself).
pub async fn connect<D: Dialect>(
    backends: &Backends,
) -> Result<PoolConnection<D::Db>, BackendError> {
    Ok(D::pool(backends)?.acquire().await?)
}

/// `sql` with `order`'s columns bound to its first six parameters, in
/// [`crate::model::order::order_columns`]'s order ([`Statements::insert_order`],
/// or a statement that inserts the order with its decrement).
pub fn with_order<'q, D: Dialect>(sql: &'static str, order: &Order) -> Stmt<'q, D> {
    Stmt::new(sql)
        .bind(order.order_id)
        .bind(order.product_id)
        .bind(order.epoch)
        .bind(&order.user_id)
        .bind(&order.strategy)
        .bind(&order.served_by)
}

/// Inserts `ctx`'s order in `tx` and commits: sold, `left` remaining. The
/// last steps of every flow that sells in a transaction it began itself.
pub async fn record<D: Dialect>(
    mut tx: Transaction<'static, D::Db>,
    ctx: &BuyCtx<'_>,
    left: i64,
) -> Result<Outcome, BackendError> {
    with_order::<D>(D::SQL.insert_order, ctx.order)
        .run(&mut tx)
        .await?;
    tx.commit().await.at_commit()?;
    Ok(Outcome::Sold { left: Some(left) })
}

/// The sqlx plumbing of a [`Dialect`] implementation ([`Dialect::bind`],
/// [`Dialect::execute`], [`Dialect::fetch_all`]): the same bodies, compiled against each
/// database's own types — where sqlx's generics could not prove that a
/// generic database's connection runs a statement.
macro_rules! plumbing {
    () => {
        fn bind<'q, T: $crate::stock::store::dialect::Param>(
            query: $crate::stock::store::dialect::Query<'q, Self>,
            value: T,
        ) -> $crate::stock::store::dialect::Query<'q, Self> {
            query.bind(value)
        }

        fn execute<'a>(
            query: $crate::stock::store::dialect::Query<'a, Self>,
            on: &'a mut $crate::stock::store::dialect::Conn<Self>,
        ) -> $crate::model::seam::StoreFuture<'a, u64> {
            Box::pin(async move { Ok(query.execute(on).await?.rows_affected()) })
        }

        fn fetch_all<'a, T: $crate::stock::store::dialect::Fetch>(
            query: $crate::stock::store::dialect::Query<'a, Self>,
            on: &'a mut $crate::stock::store::dialect::Conn<Self>,
        ) -> $crate::model::seam::StoreFuture<'a, Vec<T>> {
            Box::pin(async move {
                let rows = query.fetch_all(on).await?;
                Ok(rows.iter().map(T::from_row).collect::<Result<_, _>>()?)
            })
        }
    };
}
pub(crate) use plumbing;

/// How many times a step the database rolled back is run again.
const ROLLED_BACK_TRIES: u32 = 5;

/// Runs `step` (one statement or one whole transaction) again while the
/// database rolls it back ([`Dialect::rolled_back`]), a few times at most:
/// InnoDB's next-key and duplicate-key locks make deadlocks part of normal
/// operation, and a MySQL application must run the victim again.
pub async fn again<D, T, F, Fut>(mut step: F) -> Result<T, BackendError>
where
    D: Dialect,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    let mut tries = 0;
    loop {
        match step().await {
            Err(error) if D::rolled_back(&error) && tries < ROLLED_BACK_TRIES => tries += 1,
            done => return done,
        }
    }
}
