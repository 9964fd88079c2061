//! A token bucket per buyer, beside the one per address: behind one
//! address (a campus, a mobile carrier's NAT) sit many honest buyers, and
//! one buyer can come from many addresses; the bucket that stops one
//! buyer hammering the buy route is keyed by who is buying.
//!
//! It is checked right after the buyer is identified, before its handler
//! runs (the HTTP layer's buyer middleware): with `buyer_auth = token`
//! the key is the verified subject, which no choice of headers changes;
//! with `header` it is the declared id (a bot can dodge it with fresh ids,
//! which is what tokens are for). The same keyed GCRA limiter that
//! tower-governor wraps, called directly rather than as a layer, so that
//! its refusals reach the live view by product, which a layer's error
//! handler (it sees no request) cannot. Per instance, like the address
//! bucket: behind a gateway's round-robin a buyer gets at most instances ×
//! the rate.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

/// Each buyer's bucket.
pub struct BuyerBucket {
    limiter: Arc<DefaultKeyedRateLimiter<String>>,
    clock: DefaultClock,
}

impl BuyerBucket {
    /// Buckets refilled at `per_sec` holding `burst`; `None` when
    /// `per_sec` is 0 (off). Its stale entries are swept every two seconds
    /// until it is dropped.
    pub fn new(per_sec: u64, burst: u32) -> Option<Self> {
        if per_sec == 0 {
            return None;
        }
        let burst = NonZeroU32::new(burst.max(1)).expect("at least 1");
        let quota = Quota::with_period(super::refill_period(per_sec))
            .expect("a non-zero period")
            .allow_burst(burst);
        let limiter = Arc::new(RateLimiter::keyed(quota));
        super::keep_swept(&limiter);
        Some(Self {
            limiter,
            clock: DefaultClock::default(),
        })
    }

    /// Takes a token from `buyer`'s bucket, or says how long until one is
    /// there.
    pub fn take(&self, buyer: &str) -> Result<(), Duration> {
        self.limiter
            .check_key(&buyer.to_owned())
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }
}
