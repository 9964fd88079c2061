//! `redis-group`: `redis-lua`'s script, once per group of buyers instead
//! of once per buyer. The buyers of one product on one instance queue
//! ([`super::group`]); one `EVALSHA` takes the whole group (order ids and
//! buyers in, a verdict per buyer out), checks the stock and each buyer's
//! limit, decrements once by the units sold and `XADD`s every order, all
//! in one script, so it stays all or nothing.
//!
//! What it saves is per-command work on both sides (a system call and a
//! wake-up per request in the instance and in Redis), which is what a
//! Redis sale costs once its script is a few microseconds.
//!
//! Known failure: the same as `redis-lua` (it is the same writes): losing
//! them, to a crash without persistence or a failover to a replica that
//! had not received them.

use std::sync::LazyLock;

use redis::Script;

use super::group::SellsGroup;
use crate::backends::Backends;
use crate::backends::failure::BackendError;
use crate::model::info::{self, Info};
use crate::model::order::Order;
use crate::model::product::Product;
use crate::model::seam::Outcome;
use crate::stock::store::script;

/// The reset checked once; then, buyer by buyer in arrival order, the
/// stock left and the buyer's limit, the order recorded; one `DECRBY`.
static SELL_GROUP: LazyLock<Script> = LazyLock::new(|| {
    script::group_selling(
        "local verdicts = {} \
         if redis.call('GET', epoch_key) ~= epoch then \
           for i = first_buyer, #ARGV, 2 do \
             verdicts[#verdicts + 1] = {reset_code} verdicts[#verdicts + 1] = 0 \
           end \
           return verdicts \
         end \
         local stock = tonumber(redis.call('GET', stock_key) or '0') \
         local sold = 0 \
         for i = first_buyer, #ARGV, 2 do \
           local order_id, user = ARGV[i], ARGV[i + 1] \
           local code = {sold_code} \
           if sold >= stock then code = {sold_out_code} \
           elseif limit > 0 and tonumber(redis.call('HGET', buyers_key, user) or '0') >= limit \
           then code = {limit_reached_code} end \
           if code == {sold_code} then \
             sold = sold + 1 \
             {record} \
           end \
           verdicts[#verdicts + 1] = code \
           verdicts[#verdicts + 1] = code == {sold_code} and stock - sold or 0 \
         end \
         if sold > 0 then redis.call('DECRBY', stock_key, sold) end \
         return verdicts",
    )
});

/// The group-commit strategy on Redis: the script call that sells to one
/// group.
pub struct RedisGroup;

impl SellsGroup for RedisGroup {
    fn info(&self) -> &'static Info {
        info::entry("redis-group")
    }

    async fn sell_group(
        &self,
        backends: &Backends,
        product: &Product,
        orders: &[Order],
    ) -> Result<Vec<Outcome>, BackendError> {
        let lane = backends.lane.get().await?;
        let sold = script::run_group(&SELL_GROUP, &mut lane.conn.clone(), product, orders).await;
        lane.checked(sold)
    }
}
