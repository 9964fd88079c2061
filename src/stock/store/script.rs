//! The Redis scripts that sell, written against one layout: the same KEYS
//! and ARGV in the same places for every such script, named once by Lua
//! locals in [`PRELUDE`], and one table of answers ([`Outcome`]). No script
//! body uses a bare position or a bare number.
//!
//! The shared fragments — the reset check, the per-buyer limit, recording
//! the order in the stream — are written once here, so every script that
//! sells records an order of the same shape and counts one more write of
//! its counter (the moves key, which reconciliation's repair compares).

use redis::Script;

use crate::backends::failure::{AtCommit, BackendError};
use crate::model::order::{Order, fields};
use crate::model::product::keys::RedisCell;
use crate::model::product::{Product, keys};
use crate::model::seam::{BuyCtx, Outcome};

/// Each answer's code on the Lua side.
const CODES: [(Outcome, i64); 5] = [
    (Outcome::Sold { left: None }, 1),
    (Outcome::SoldOut, 2),
    (Outcome::Reset, 3),
    (Outcome::LimitReached, 4),
    (Outcome::Fenced, 5),
];

impl Outcome {
    /// The code a script returns for this answer.
    pub fn code(self) -> i64 {
        let same = |w: &Outcome| std::mem::discriminant(w) == std::mem::discriminant(&self);
        CODES.iter().find(|(w, _)| same(w)).map_or(0, |(_, c)| *c)
    }

    /// The answer a script's reply `{code, stock after}` stands for.
    pub fn from_reply(reply: &[i64]) -> Result<Self, BackendError> {
        let code = reply.first().copied().unwrap_or_default();
        match CODES.iter().find(|(_, c)| *c == code) {
            Some((Outcome::Sold { .. }, _)) => Ok(Outcome::Sold {
                left: reply.get(1).copied(),
            }),
            Some((written, _)) => Ok(*written),
            None => Err(BackendError::Corrupt(format!(
                "a selling script answered {reply:?}"
            ))),
        }
    }
}

/// Names every KEYS and ARGV slot of a selling script; [`run`] fills them
/// in this order.
pub const PRELUDE: &str = "\
local stock_key, epoch_key, orders_key, buyers_key, fence_key, moves_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6] \
local epoch, limit = ARGV[1], tonumber(ARGV[2]) \
local order_id, product, user, strategy, served_by = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7] \
local new_stock, fence = ARGV[8], ARGV[9] ";

/// A selling script: [`PRELUDE`], then `body`, where `return {sold}` (the
/// body has set the local `left` to the stock after the sale: the value
/// its own write returned, not another read),
/// `{sold_out}`, `{reset}`, `{limit_reached}`, `{fenced}` stand for the
/// answers (a table: the code, and for a sale the stock left) and
/// `{check_epoch}`, `{check_limit}`, `{record}` for the shared steps.
pub fn selling(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{}", expand(body)))
}

/// Names every KEYS and ARGV slot of a script that sells to a group of
/// buyers at once; [`run_group`] fills them in this order. The buyers come
/// last, two slots each (order id, buyer) from `first_buyer` on; the body
/// loops over them with `order_id` and `user` as locals, so [`PRELUDE`]'s
/// shared steps read the same names.
pub const GROUP_PRELUDE: &str = "\
local stock_key, epoch_key, orders_key, buyers_key, moves_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5] \
local epoch, limit, product, strategy, served_by = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5] \
local first_buyer = 6 ";

/// A script that sells to a group: [`GROUP_PRELUDE`], then `body`, with
/// the steps of [`selling`] and `{sold_code}`, `{sold_out_code}`,
/// `{reset_code}`, `{limit_reached_code}` for the bare answer codes (the
/// reply is a flat list: code and stock left, per buyer).
pub fn group_selling(body: &str) -> Script {
    Script::new(&format!("{GROUP_PRELUDE}{}", expand(body)))
}

/// `body` with its steps and answers filled in.
fn expand(body: &str) -> String {
    let code = |w: Outcome| format!("{{{}}}", w.code());
    let check_epoch = format!(
        "if redis.call('GET', epoch_key) ~= epoch then return {} end",
        code(Outcome::Reset)
    );
    let check_limit = format!(
        "if limit > 0 and tonumber(redis.call('HGET', buyers_key, user) or '0') >= limit \
         then return {} end",
        code(Outcome::LimitReached)
    );
    let record = format!(
        "if limit > 0 then redis.call('HINCRBY', buyers_key, user, 1) end \
         redis.call('INCR', moves_key) \
         redis.call('XADD', orders_key, '*', '{line}', order_id .. ' ' .. product .. ' ' .. \
         epoch .. ' ' .. user .. ' ' .. strategy .. ' ' .. served_by)",
        line = fields::LINE,
    );
    body.replace("{check_epoch}", &check_epoch)
        .replace("{check_limit}", &check_limit)
        .replace("{record}", &record)
        .replace(
            "{sold}",
            &format!("{{{}, left}}", Outcome::Sold { left: None }.code()),
        )
        .replace("{sold_out}", &code(Outcome::SoldOut))
        .replace("{reset}", &code(Outcome::Reset))
        .replace("{limit_reached}", &code(Outcome::LimitReached))
        .replace("{fenced}", &code(Outcome::Fenced))
        .replace(
            "{sold_code}",
            &Outcome::Sold { left: None }.code().to_string(),
        )
        .replace("{sold_out_code}", &Outcome::SoldOut.code().to_string())
        .replace("{reset_code}", &Outcome::Reset.code().to_string())
        .replace(
            "{limit_reached_code}",
            &Outcome::LimitReached.code().to_string(),
        )
}

/// Runs a [`group_selling`] script for `orders` (one product, one reset,
/// one instance): one verdict per order, in order.
pub async fn run_group(
    script: &Script,
    conn: &mut crate::backends::conn::RedisConn,
    product: &Product,
    orders: &[Order],
) -> Result<Vec<Outcome>, BackendError> {
    let first = orders
        .first()
        .ok_or_else(|| BackendError::Corrupt("a group without buyers".into()))?;
    let mut invocation = script.prepare_invoke();
    invocation
        .key(keys::stock(product.id))
        .key(keys::epoch(product.id))
        .key(keys::orders(product.id))
        .key(keys::buyers(product.id))
        .key(keys::moves_of(&keys::stock(product.id)))
        .arg(product.epoch)
        .arg(product.settings.per_user_limit)
        .arg(product.id)
        .arg(&first.strategy)
        .arg(&first.served_by);
    for order in orders {
        invocation
            .arg(order.order_id.to_string())
            .arg(&order.user_id);
    }
    let reply: Vec<i64> = invocation.invoke_async(conn).await.at_commit()?;
    reply.chunks(2).map(Outcome::from_reply).collect()
}

/// Runs a [`selling`] script for this buy on `cell`, with the new stock
/// and the fencing token where the script uses them.
pub async fn run(
    script: &Script,
    ctx: &BuyCtx<'_>,
    cell: &RedisCell,
    new_stock: Option<i64>,
    fence: Option<u64>,
) -> Result<Outcome, BackendError> {
    let id = ctx.product.id;
    let limit = if cell.counts_buyer {
        ctx.product.settings.per_user_limit
    } else {
        0
    };
    let reply: Vec<i64> = script
        .key(&cell.key)
        .key(cell.place.epoch())
        .key(cell.place.orders())
        .key(cell.place.buyers())
        .key(cell.place.fence_seen())
        .key(cell.moves_key())
        .arg(ctx.product.epoch)
        .arg(limit)
        .arg(&ctx.order.stream_args())
        .arg(new_stock.map(|s| s.to_string()).unwrap_or_default())
        .arg(fence.map(|t| t.to_string()).unwrap_or_default())
        .invoke_async(&mut ctx.redis.clone())
        .await
        .at_commit()?;
    let written = Outcome::from_reply(&reply)?;
    // A segment's count is not the product's: no unit number from it.
    Ok(match written {
        Outcome::Sold { .. } if cell.key != keys::stock(id) => Outcome::Sold { left: None },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_has_its_own_code() {
        for (written, code) in CODES {
            assert_eq!(Outcome::from_reply(&[code]).unwrap(), written);
            assert_eq!(written.code(), code);
        }
        assert_eq!(
            Outcome::from_reply(&[1, 7]).unwrap(),
            Outcome::Sold { left: Some(7) }
        );
        assert!(Outcome::from_reply(&[0]).is_err());
        assert!(Outcome::from_reply(&[]).is_err());
    }

    #[test]
    fn the_steps_are_filled_in_and_positions_stay_in_the_prelude() {
        let text = format!(
            "{PRELUDE}{}",
            expand("{check_epoch} {check_limit} {record} return {sold} {sold_code} {reset_code}")
        );
        let placeholder = text.split('{').skip(1).any(|rest| {
            rest.split('}').next().is_some_and(|name| {
                name.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !name.is_empty()
            })
        });
        assert!(!placeholder, "a step was left unexpanded: {text}");
        let body = &text[PRELUDE.len()..];
        assert!(!body.contains("ARGV[") && !body.contains("KEYS["), "{body}");
        assert!(body.ends_with("return {1, left} 1 3"), "{body}");
    }
}
