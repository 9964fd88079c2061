//! Redis key names for one product.
//!
//! Every product belongs to one of [`SHARDS`] order-stream shards, by its
//! id, and all its keys carry the shard's hash tag (`{s17.40}`): a selling
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
    Place::home(id).prefix()
}

/// Where a group of a product's keys lives: one shard's hash tag, hence
/// one cluster slot. A selling script takes all its keys from one place:
/// the counter it sells from, the reset epoch it checks, the order stream
/// it appends to, the buyer counts and the fencing record.
///
/// A product's home is its own shard. `segmented` puts each segment in a
/// place of its own ([`Place::segment`]), so that its segments spread
/// over a cluster's masters; each such place carries a copy of the
/// product's epoch (written by the reset) and takes the segment's orders
/// in its own shard's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    shard: i64,
    id: i64,
}

/// Hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// Each shard's hash tag, and its slot, computed once (see [`tag_of`]).
static SHARD_TAGS: std::sync::LazyLock<Vec<(String, u16)>> = std::sync::LazyLock::new(|| {
    (0..SHARDS)
        .map(|s| {
            let tag = tag_of(s);
            let slot = slot_of_tag(&tag);
            (tag, slot)
        })
        .collect()
});

/// The slot of `shard`'s hash tag.
fn shard_slot(shard: i64) -> u16 {
    SHARD_TAGS[shard as usize].1
}

/// The hash tag of `shard`: `s<shard>.<j>` with the first `j` whose slot
/// falls in the shard's own arc of the slot ring (the ring cut into
/// [`SHARDS`] equal arcs). The arcs are dealt out in bit-reversed order
/// (0, 32, 16, 48, 8 …), so any run of consecutive shards — consecutive
/// product ids — lands evenly round the ring, and so evenly over any
/// number of masters that split the ring into equal ranges. Tags of
/// plain names (`s0`, `s1` …) fall where CRC16 puts them: measured, 7 of
/// 12 consecutive products on one master of three.
fn tag_of(shard: i64) -> String {
    const BITS: u32 = SHARDS.trailing_zeros();
    const { assert!((SHARDS as u64).is_power_of_two()) };
    let arc = (shard as u32).reverse_bits() >> (u32::BITS - BITS);
    let width = u32::from(SLOTS) / SHARDS as u32;
    (0..)
        .map(|j| format!("s{shard}.{j}"))
        .find(|tag| u32::from(slot_of_tag(tag)) / width == arc)
        .expect("some suffix hashes into every arc")
}

impl Place {
    /// Product `id`'s own place.
    pub fn home(id: i64) -> Self {
        Self {
            shard: shard(id),
            id,
        }
    }

    /// Where segment `k` of `segments` of product `id` lives: the shard
    /// whose slot is nearest to the middle of the `k`-th of `segments`
    /// equal arcs of the slot ring. A cluster's masters serve contiguous
    /// slot ranges (`redis-cli --cluster create` splits them evenly), so
    /// when their number divides `segments`, every boundary between two
    /// masters lies halfway between two targets — at least 256 slots from
    /// each for up to 32 segments — and every target has a shard less
    /// than 256 slots away (one in each arc, see [`tag_of`]): each master
    /// gets exactly its share of segments, with no need to ask the
    /// cluster. One Redis is one master; the spread costs nothing there.
    pub fn segment(id: i64, k: u32, segments: u32) -> Self {
        let segments = segments.max(1);
        let target = (u32::from(SLOTS) * (2 * k + 1) / (2 * segments)) as u16;
        let distance = |slot: u16| {
            let d = slot.abs_diff(target);
            d.min(SLOTS - d)
        };
        let shard = (0..SHARDS)
            .min_by_key(|&s| (distance(shard_slot(s)), s))
            .unwrap_or(0);
        Self { shard, id }
    }

    fn prefix(self) -> String {
        format!(
            "seckill:{{{}}}:{}",
            SHARD_TAGS[self.shard as usize].0, self.id
        )
    }

    /// The cluster slot every key of this place hashes to.
    pub fn slot(self) -> u16 {
        shard_slot(self.shard)
    }

    /// The product's reset epoch, or this place's copy of it.
    pub fn epoch(self) -> String {
        format!("{}:epoch", self.prefix())
    }

    /// The order stream of this place's shard.
    pub fn orders(self) -> String {
        orders_of_shard(self.shard)
    }

    /// Units held per buyer, counted here.
    pub fn buyers(self) -> String {
        format!("{}:buyers", self.prefix())
    }

    /// The newest fencing token that has touched a counter here.
    pub fn fence_seen(self) -> String {
        format!("{}:fence:seen", self.prefix())
    }
}

/// The Redis Cluster slot of `key`: its hash tag's (the text between the
/// first `{` and the next `}`, when not empty), else the whole key's.
pub fn slot_of_key(key: &str) -> u16 {
    let tag = key.find('{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.find('}').map(|close| &rest[..close])
    });
    match tag {
        Some(tag) if !tag.is_empty() => slot_of_tag(tag),
        _ => slot_of_tag(key),
    }
}

/// The Redis Cluster slot of a hash tag: CRC16 (XMODEM) of the tag, modulo
/// [`SLOTS`] — what the server computes for a key `…{tag}…`.
fn slot_of_tag(tag: &str) -> u16 {
    let mut crc: u16 = 0;
    for byte in tag.bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % SLOTS
}

/// The Redis strategies' stock counter.
pub fn stock(id: i64) -> String {
    format!("{}:stock", product_prefix(id))
}
/// The current reset generation, checked by every Redis write so a buy
/// that started before a reset cannot sell into the new stock.
pub fn epoch(id: i64) -> String {
    Place::home(id).epoch()
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
    Place::home(id).fence_seen()
}
/// The Pub/Sub channel announcing a `redisson` unlock.
pub fn unlock_channel(id: i64) -> String {
    format!("{}:unlock", product_prefix(id))
}
/// Stock of segment `k` of `segments` of `segmented`, in its own place.
pub fn segment(id: i64, k: u32, segments: u32) -> String {
    format!("{}:seg:{k}", Place::segment(id, k, segments).prefix())
}
/// Lock of segment `k` of `segments` of `segmented`.
pub fn segment_lock(id: i64, k: u32, segments: u32) -> String {
    format!("{}:seg:{k}:lock", Place::segment(id, k, segments).prefix())
}
/// Units held per buyer (a hash: buyer -> count), for `per_user_limit`.
pub fn buyers(id: i64) -> String {
    Place::home(id).buyers()
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
/// A hidden path's nonce, once used: what makes the path good for one
/// buy. Outside the product's prefix: it expires with the path, not at a
/// reset.
pub fn path_used(id: i64, nonce: &str) -> String {
    format!("seckill:path-used:{id}:{nonce}")
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
    Place::home(id).orders()
}

/// The order stream of `shard`.
pub fn orders_of_shard(shard: i64) -> String {
    format!("seckill:{{{}}}:orders", SHARD_TAGS[shard as usize].0)
}

/// Every order stream, shard by shard: what the writers drain.
pub fn all_orders() -> Vec<String> {
    (0..SHARDS).map(orders_of_shard).collect()
}

/// The write count beside the counter `stock_key` ([`RedisCell::moves_key`]).
pub fn moves_of(stock_key: &str) -> String {
    format!("{stock_key}:moves")
}

/// A Redis counter and where the script that writes it finds the rest of
/// its keys (one place, one cluster slot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisCell {
    /// The counter.
    pub key: String,
    /// Its place: the epoch, order stream, buyer counts and fencing
    /// record the selling script uses.
    pub place: Place,
    /// Whether the selling script checks and counts the per-buyer limit.
    /// False where the buyer's unit was claimed beforehand at the
    /// product's home (the per-buyer limit's claim at home, for
    /// `segmented`): a segment away from home cannot count the buyer in
    /// the same atomic step.
    pub counts_buyer: bool,
}

impl RedisCell {
    /// The product's one counter, at home, counting buyers.
    pub fn home(product: &super::Product) -> Self {
        Self {
            key: stock(product.id),
            place: Place::home(product.id),
            counts_buyer: true,
        }
    }

    /// The key holding how many waves this counter holds (beside it, in
    /// its slot).
    pub fn waves_key(&self) -> String {
        format!("{}:waves", self.key)
    }

    /// How many times this counter was written (beside it, in its slot):
    /// every script that writes the counter adds one, so a repair that
    /// read it can tell "nothing moved" from "moved and came back" (ABA).
    pub fn moves_key(&self) -> String {
        moves_of(&self.key)
    }

    /// The set of order ids whose unit was put back on this counter
    /// (beside it, in its slot): what makes a give-back happen once.
    pub fn restocked_key(&self) -> String {
        format!("{}:restocked", self.key)
    }

    /// The hash of the admin's additions to this counter in reset
    /// `epoch` (addition id → units; beside it, in its slot): what makes
    /// an addition happen once, and what the ledger sums. Named by the
    /// epoch, so no reset can count another's.
    pub fn added_key(&self, epoch: i64) -> String {
        format!("{}:added:{epoch}", self.key)
    }
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

    #[test]
    fn slots_are_what_redis_computes() {
        // `CLUSTER KEYSLOT` answers, from a real server.
        assert_eq!(slot_of_tag("123456789"), 12739);
        assert_eq!(slot_of_tag("s0"), 11097);
        assert_eq!(slot_of_tag("user1000"), 3443);
        assert_eq!(slot_of_key("seckill:{s0}:64:stock"), 11097);
        assert_eq!(slot_of_key("foo{}{bar}"), 8363);
        assert_eq!(slot_of_key("{user1000}.following"), 3443);
    }

    #[test]
    fn a_segments_keys_share_its_places_tag() {
        for id in [1, 9001, 990_001] {
            for segments in [1, 4, 6] {
                for k in 0..segments {
                    let place = Place::segment(id, k, segments);
                    let stream = place.orders();
                    for key in [
                        segment(id, k, segments),
                        segment_lock(id, k, segments),
                        place.epoch(),
                        place.buyers(),
                        place.fence_seen(),
                    ] {
                        assert_eq!(tag(&key), tag(&stream), "{key} vs {stream}");
                    }
                }
            }
        }
    }

    /// Which of `masters` equal contiguous slot ranges serves `slot`.
    fn master_of(slot: u16, masters: u32) -> u32 {
        u32::from(slot) * masters / u32::from(SLOTS)
    }

    #[test]
    fn every_shard_owns_its_arc_and_consecutive_products_spread() {
        let width = u32::from(SLOTS) / SHARDS as u32;
        let mut arcs: Vec<u32> = (0..SHARDS)
            .map(|s| u32::from(shard_slot(s)) / width)
            .collect();
        arcs.sort_unstable();
        assert_eq!(arcs, (0..SHARDS as u32).collect::<Vec<_>>());
        // Any 12 consecutive products over 3 equal masters: at most 5 on
        // one (under half), wherever the run starts.
        for first in 0..SHARDS {
            let mut per_master = [0; 3];
            for id in first..first + 12 {
                per_master[master_of(Place::home(id).slot(), 3) as usize] += 1;
            }
            assert!(
                per_master.iter().all(|&n| n <= 5),
                "{first}: {per_master:?}"
            );
        }
    }

    #[test]
    fn segments_spread_evenly_over_masters_that_divide_them() {
        for (segments, masters) in [(6, 3), (3, 3), (12, 3), (8, 4), (10, 5), (32, 4)] {
            let mut per_master = vec![0; masters as usize];
            for k in 0..segments {
                per_master[master_of(Place::segment(1, k, segments).slot(), masters) as usize] += 1;
            }
            let share = segments / masters;
            assert!(
                per_master.iter().all(|&n| n == share),
                "{segments} over {masters}: {per_master:?}"
            );
        }
    }
}
