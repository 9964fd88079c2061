//! `db-group`: group commit on the hot row. The buyers of one product on
//! one instance queue ([`super::group`]); each group is sold by one call
//! of `seckill_sell_group` (migration 0004): the row locked, the limit
//! checked for every buyer, one decrement by k, the k orders in one
//! `INSERT` from arrays, one commit. A sale costs a share of a commit
//! instead of a commit, which is where one hot row spends its time.
//!
//! Safe with N instances: each instance's groups queue on the row lock,
//! which serializes them as it serialized single sales.
//!
//! Known failure: none for correctness. A buyer's answer waits for the
//! group's commit, so under light load it is one statement, as
//! `db-atomic`; and one failed commit fails the whole group alike (every
//! buyer told `outcome_unknown`).

use super::group::SellsGroup;
use crate::backends::Backends;
use crate::backends::failure::{AtCommit, BackendError};
use crate::model::info::{self, Info};
use crate::model::order::Order;
use crate::model::product::Product;
use crate::model::seam::Outcome;

/// One call sells to the whole group.
const SELL_GROUP_SQL: &str = "SELECT verdict, stock_left FROM \
     seckill_sell_group($1, $2, $3, $4, $5, $6, $7)";

/// The group-commit strategy on PostgreSQL: the step that sells to one
/// group.
pub struct DbGroup;

impl SellsGroup for DbGroup {
    fn info(&self) -> &'static Info {
        info::entry("db-group")
    }

    async fn sell_group(
        &self,
        backends: &Backends,
        product: &Product,
        orders: &[Order],
    ) -> Result<Vec<Outcome>, BackendError> {
        let ids: Vec<uuid::Uuid> = orders.iter().map(|o| o.order_id).collect();
        let users: Vec<&str> = orders.iter().map(|o| o.user_id.as_str()).collect();
        let first = orders
            .first()
            .ok_or_else(|| BackendError::Corrupt("a group without buyers".into()))?;
        let rows: Vec<(i16, Option<i64>)> = sqlx::query_as(SELL_GROUP_SQL)
            .bind(product.id)
            .bind(product.epoch)
            .bind(i32::try_from(product.settings.per_user_limit).unwrap_or(i32::MAX))
            .bind(&ids)
            .bind(&users)
            .bind(&first.strategy)
            .bind(&first.served_by)
            .fetch_all(&backends.pg)
            .await
            .at_commit()?;
        rows.into_iter()
            .map(|(code, left)| Outcome::from_reply(&[code.into(), left.unwrap_or_default()]))
            .collect()
    }
}
