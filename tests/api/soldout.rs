//! The local sold-out flag: answered from memory once an instance has seen
//! the product sell out, and cleared on every instance by a reset.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use seckill::lab::client::BuyResult;
use serde_json::json;

use crate::harness::{TestLab, shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restocking_reset_clears_every_instances_flag() {
    let lab = shared();
    let (a, b) = (lab.instance(0), lab.instance(1));
    let sold_out = BuyResult::Failed("sold_out".into());
    lab.gateway()
        .reset(801, &json!({"stock": 1, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    assert_eq!(a.buy(801, "first").await, BuyResult::Ok);
    assert_eq!(a.buy(801, "late-a").await, sold_out);
    assert_eq!(b.buy(801, "late-b").await, sold_out);
    // Both instances are flagged now. A reset through either one must
    // reach both before it answers.
    lab.gateway()
        .reset(801, &json!({"stock": 2, "strategy": "redis-lua"}))
        .await
        .expect("restock");
    assert_eq!(
        a.buy(801, "again-a").await,
        BuyResult::Ok,
        "instance a still refused"
    );
    assert_eq!(
        b.buy(801, "again-b").await,
        BuyResult::Ok,
        "instance b still refused"
    );
    assert_eq!(lab.gateway().ledger(801).await.expect("ledger").sold, 2);
}

/// Resumes a frozen process however the test ends.
struct Thaw(Pid);

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = kill(self.0, Signal::SIGCONT);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flagged_product_is_refused_without_touching_the_backends() {
    let lab = TestLab::start(1);
    let instance = lab.instance(0);
    instance
        .reset(802, &json!({"stock": 1, "strategy": "redis-lua"}))
        .await
        .expect("reset");
    assert_eq!(instance.buy(802, "first").await, BuyResult::Ok);
    assert_eq!(
        instance.buy(802, "second").await,
        BuyResult::Failed("sold_out".into())
    );
    // A product with stock and no flag, to show what a frozen Redis does
    // to a buy that is not answered from memory.
    instance
        .reset(803, &json!({"stock": 5, "strategy": "redis-lua"}))
        .await
        .expect("reset");

    let redis = lab
        .info
        .processes
        .iter()
        .find(|p| p.name == "redis")
        .and_then(|p| p.pid)
        .expect("redis pid");
    let redis = Pid::from_raw(redis as i32);
    kill(redis, Signal::SIGSTOP).expect("freeze redis");
    let _thaw = Thaw(redis);
    // Any Redis command would now time out into a 500: a sold_out answer
    // can only come from the flag.
    assert_eq!(
        instance.buy(802, "third").await,
        BuyResult::Failed("sold_out".into()),
        "answered from the flag"
    );
    // A product without a flag needs Redis, which is frozen: it fails
    // (and sells nothing, which the ledger shows once Redis is back).
    let unflagged = instance.buy(803, "someone").await;
    assert!(
        matches!(&unflagged, BuyResult::Failed(code) if code != "sold_out"),
        "{unflagged:?}"
    );
    drop(_thaw);
    let ledger = instance.ledger(803).await.expect("ledger");
    assert_eq!((ledger.sold, ledger.remaining), (0, 5), "{ledger:?}");
}
