//! What every MySQL statement of the stores shares: the order's INSERT,
//! and running again what InnoDB rolled back (a deadlock's victim, a lock
//! wait past its timeout) — on its own so that the MySQL store and
//! MySQL's statements for the database strategies both take it.

use crate::backends::failure::BackendError;
use crate::model::seam::BuyCtx;

/// The `orders` INSERT of a MySQL-stored sale (`?` placeholders, bound by
/// [`bind_order`]).
pub const INSERT_ORDER: &str = "INSERT INTO orders \
     (order_id, product_id, epoch, user_id, strategy, served_by) VALUES (?, ?, ?, ?, ?, ?)";

/// Binds `ctx`'s order to [`INSERT_ORDER`].
pub fn bind_order<'q>(
    ctx: &'q BuyCtx<'_>,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    let order = ctx.order;
    sqlx::query(INSERT_ORDER)
        .bind(order.order_id)
        .bind(order.product_id)
        .bind(order.epoch)
        .bind(&order.user_id)
        .bind(&order.strategy)
        .bind(&order.served_by)
}

/// How many times a statement InnoDB rolled back is run again.
const ROLLED_BACK_TRIES: u32 = 5;

/// Runs `step` (one statement or one whole transaction) again while InnoDB
/// rolls it back ([`rolled_back`]), a few times at most.
pub async fn again_if_rolled_back<T, F, Fut>(mut step: F) -> Result<T, BackendError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, BackendError>>,
{
    let mut tries = 0;
    loop {
        match step().await {
            Err(error) if rolled_back(&error) && tries < ROLLED_BACK_TRIES => tries += 1,
            done => return done,
        }
    }
}

/// InnoDB rolled the statement's transaction back whole: it was chosen as
/// a deadlock's victim (1213) or waited past `innodb_lock_wait_timeout`
/// (1205). Nothing of it happened, so running it again is safe — and a
/// MySQL application must: InnoDB's next-key and duplicate-key locks make
/// deadlocks part of normal operation where PostgreSQL has none.
pub fn rolled_back(error: &BackendError) -> bool {
    let BackendError::Sql(sqlx::Error::Database(db)) = error else {
        return false;
    };
    db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
        .is_some_and(|e| matches!(e.number(), 1213 | 1205))
}
