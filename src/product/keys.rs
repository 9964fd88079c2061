//! Redis key names for one product.
//!
//! Every product belongs to one of [`SHARDS`] order-stream shards, by its
//! id, and all its keys carry the shard's hash tag (`{s17}`): a selling
//! script touches the product's keys *and* its shard's order stream, and
//! Redis Cluster runs a script only on keys of one slot. A fixed number of
//! shards means the order writers know every stream by name, with no
//! registry to keep (or to lose with a Redis that lost its data), and
//! products still spread over a cluster's masters by their shards.

/// How many order streams (and hash tags) the products are spread over.
pub const SHARDS: i64 = 64;

/// The shard of product `id`.
pub fn shard(id: i64) -> i64 {
    id.rem_euclid(SHARDS)
}

/// The key prefix of product `id`: its shard's hash tag, then the id.
fn product_prefix(id: i64) -> String {
    format!("seckill:{{s{}}}:{id}", shard(id))
}

/// The Redis strategies' stock counter.
pub fn stock(id: i64) -> String {
    format!("{}:stock", product_prefix(id))
}
/// The current reset generation, checked by every Redis write so a buy
/// that started before a reset cannot sell into the new stock.
pub fn epoch(id: i64) -> String {
    format!("{}:epoch", product_prefix(id))
}
/// The product's JSON, the buy path's cache of the PostgreSQL row.
pub fn product(id: i64) -> String {
    format!("{}:product", product_prefix(id))
}
/// The lock of the Redis lock strategies.
pub fn lock(id: i64) -> String {
    format!("{}:lock", product_prefix(id))
}
/// The fencing-token counter of `fenced` (INCR on acquire).
pub fn fence(id: i64) -> String {
    format!("{}:fence", product_prefix(id))
}
/// The newest fencing token that has touched the stock.
pub fn fence_seen(id: i64) -> String {
    format!("{}:fence:seen", product_prefix(id))
}
/// The Pub/Sub channel announcing a `redisson` unlock.
pub fn unlock_channel(id: i64) -> String {
    format!("{}:unlock", product_prefix(id))
}
/// Stock of segment `k` of `segmented`.
pub fn segment(id: i64, k: u32) -> String {
    format!("{}:seg:{k}", product_prefix(id))
}
/// Lock of segment `k` of `segmented`.
pub fn segment_lock(id: i64, k: u32) -> String {
    format!("{}:seg:{k}:lock", product_prefix(id))
}
/// Units held per buyer (a hash: buyer -> count), for `per_user_limit`.
pub fn buyers(id: i64) -> String {
    format!("{}:buyers", product_prefix(id))
}
/// A buyer's `Idempotency-Key` for one reset of the product: pending,
/// or the answer of the sale it made.
pub fn idempotency(id: i64, epoch: i64, buyer: &str, key: &str) -> String {
    // The buyer's length keeps `a:b` + `c` apart from `a` + `b:c`:
    // one buyer must never replay another's order.
    format!(
        "{}:idem:{epoch}:{}:{buyer}:{key}",
        product_prefix(id),
        buyer.len()
    )
}
/// How many buys of one reset of the product were answered
/// `outcome_unknown` by an instance (the gateway's own 502/504s are not
/// among them: the instance that would count them is gone).
pub fn unknown(id: i64, epoch: i64) -> String {
    format!("{}:unknown:{epoch}", product_prefix(id))
}
/// The stream of the orders Redis strategies sold of product `id`: its
/// shard's, shared with the other products of the shard, drained into
/// PostgreSQL by every instance's order writer.
pub fn orders(id: i64) -> String {
    orders_of_shard(shard(id))
}

/// The order stream of `shard`.
pub fn orders_of_shard(shard: i64) -> String {
    format!("seckill:{{s{shard}}}:orders")
}

/// Every order stream, shard by shard: what the writers drain.
pub fn all_orders() -> Vec<String> {
    (0..SHARDS).map(orders_of_shard).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash tag of a key: what Redis Cluster hashes to its slot.
    fn tag(key: &str) -> &str {
        let open = key.find('{').expect("a tag");
        let close = key[open..].find('}').expect("a closed tag") + open;
        &key[open + 1..close]
    }

    #[test]
    fn a_products_keys_and_its_order_stream_share_one_hash_tag() {
        for id in [1, 7, 63, 64, 990_001, i64::MAX] {
            let stream = orders(id);
            for key in [
                stock(id),
                epoch(id),
                product(id),
                lock(id),
                fence(id),
                fence_seen(id),
                segment(id, 3),
                segment_lock(id, 3),
                buyers(id),
                idempotency(id, 2, "a:b", "k}{"),
                unknown(id, 2),
            ] {
                assert_eq!(tag(&key), tag(&stream), "{key} vs {stream}");
            }
        }
        assert_ne!(orders(1), orders(2));
        assert_eq!(orders(1), orders(1 + SHARDS));
        assert_eq!(all_orders().len(), SHARDS as usize);
        assert!(all_orders().contains(&orders(i64::MAX)));
        // Products of one shard keep apart.
        assert_ne!(stock(1), stock(1 + SHARDS));
    }
}
