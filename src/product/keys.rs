//! Redis key names for one product. The `{id}` hash tag keeps a product's
//! keys in one cluster slot.

/// The Redis strategies' stock counter.
pub fn stock(id: i64) -> String {
    format!("seckill:{{{id}}}:stock")
}
/// The current reset generation, checked by every Redis write so a buy
/// that started before a reset cannot sell into the new stock.
pub fn epoch(id: i64) -> String {
    format!("seckill:{{{id}}}:epoch")
}
/// The product's JSON, the buy path's cache of the PostgreSQL row.
pub fn product(id: i64) -> String {
    format!("seckill:{{{id}}}:product")
}
/// The lock of the Redis lock strategies.
pub fn lock(id: i64) -> String {
    format!("seckill:{{{id}}}:lock")
}
/// The fencing-token counter of `fenced` (INCR on acquire).
pub fn fence(id: i64) -> String {
    format!("seckill:{{{id}}}:fence")
}
/// The newest fencing token that has touched the stock.
pub fn fence_seen(id: i64) -> String {
    format!("seckill:{{{id}}}:fence:seen")
}
/// The Pub/Sub channel announcing a `redisson` unlock.
pub fn unlock_channel(id: i64) -> String {
    format!("seckill:{{{id}}}:unlock")
}
/// Stock of segment `k` of `segmented`.
pub fn segment(id: i64, k: u32) -> String {
    format!("seckill:{{{id}}}:seg:{k}")
}
/// Lock of segment `k` of `segmented`.
pub fn segment_lock(id: i64, k: u32) -> String {
    format!("seckill:{{{id}}}:seg:{k}:lock")
}
/// Units held per buyer (a hash: buyer -> count), for `per_user_limit`.
pub fn buyers(id: i64) -> String {
    format!("seckill:{{{id}}}:buyers")
}
/// A buyer's `Idempotency-Key` for one reset of the product: pending,
/// or the answer of the sale it made.
pub fn idempotency(id: i64, epoch: i64, buyer: &str, key: &str) -> String {
    // The buyer's length keeps `a:b` + `c` apart from `a` + `b:c`:
    // one buyer must never replay another's order.
    format!(
        "seckill:{{{id}}}:idem:{epoch}:{}:{buyer}:{key}",
        buyer.len()
    )
}
/// How many buys of one reset of the product were answered
/// `outcome_unknown` by an instance (the gateway's own 502/504s are not
/// among them: the instance that would count them is gone).
pub fn unknown(id: i64, epoch: i64) -> String {
    format!("seckill:{{{id}}}:unknown:{epoch}")
}
/// The stream of orders sold by Redis strategies, drained into
/// PostgreSQL by every instance's order writer.
pub const ORDERS: &str = "seckill:orders";
