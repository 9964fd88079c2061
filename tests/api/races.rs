//! The races: unsafe strategies oversell on every run (the knobs make the
//! window wide, not luck), safe ones never do.

use serde_json::json;

use std::time::Duration;

use seckill::model::product::Recipe;
use seckill::stock::strategy::Catalogue;

use crate::harness::{Race, come_back, race_on, shared};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naive_oversells_across_two_instances() {
    let lab = shared();
    let row = race_on(&lab.audit(), &lab.gateway(), Race::stampede(101)).await;
    assert!(row.oversold > 0, "naive must oversell: {row:?}");
    assert!(row.lost_updates > 0, "naive loses decrements: {row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mutex_oversells_across_two_instances() {
    let lab = shared();
    // Each instance serialises its own buyers, but the two instances run
    // their sections side by side for 100 ms each: both sell from one read.
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 102,
            strategy: "local-mutex",
            stock: 5,
            buyers: 20,
            concurrency: 20,
            pace: None,
            settings: json!({"work_ms": 100}),
        },
    )
    .await;
    assert!(
        row.oversold > 0,
        "local-mutex must oversell on 2 instances: {row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_mutex_is_safe_on_one_instance() {
    let lab = shared();
    // Same race, all buyers sent to one instance directly.
    let row = race_on(
        &lab.audit(),
        &lab.instance(0),
        Race {
            product: 103,
            strategy: "local-mutex",
            stock: 5,
            buyers: 20,
            concurrency: 20,
            pace: None,
            settings: json!({"work_ms": 100}),
        },
    )
    .await;
    assert_eq!(row.oversold, 0, "{row:?}");
    assert_eq!(row.sold, 5, "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_oversells_when_the_lease_expires_under_the_holder() {
    let lab = shared();
    // 50 ms lease, 200 ms of work: the lock expires under every holder and
    // the next buyer enters while the first has not written yet.
    let settings = json!({"work_ms": 200, "lease_ms": 50});
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 104,
            strategy: "redis-lock",
            stock: 5,
            buyers: 20,
            concurrency: 20,
            pace: None,
            settings,
        },
    )
    .await;
    assert!(
        row.oversold > 0,
        "redis-lock must oversell past its lease: {row:?}"
    );
    // The history shows how: buyers told the same unit number.
    assert!(
        row.violations.get("duplicate_unit").is_some_and(|n| *n > 0),
        "{row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lock_is_safe_when_the_lease_covers_the_work() {
    let lab = shared();
    let settings = json!({"work_ms": 20, "lease_ms": 5000});
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 105,
            strategy: "redis-lock",
            stock: 5,
            buyers: 20,
            concurrency: 20,
            pace: None,
            settings,
        },
    )
    .await;
    assert_eq!(row.oversold, 0, "{row:?}");
    assert_eq!(row.sold, 5, "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_optimistic_never_oversells_and_reports_buyers_who_gave_up() {
    let lab = shared();
    // Few retries and real work between read and write: many compare-and-
    // sets lose, and buyers out of retries are counted as `busy`.
    let settings = json!({"max_retries": 2, "work_ms": 2});
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 113,
            strategy: "db-optimistic",
            stock: 100,
            buyers: 1000,
            concurrency: 200,
            pace: None,
            settings,
        },
    )
    .await;
    assert!(row.sold <= 100, "{row:?}");
    assert_eq!(row.oversold, 0, "{row:?}");
    assert_eq!(
        row.initial - row.remaining,
        row.sold,
        "no lost update: {row:?}"
    );
    assert!(
        row.errors.get("busy").copied().unwrap_or(0) > 0,
        "contention must exhaust some buyers' retries: {row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_safe_strategy_sells_exactly_the_stock() {
    let lab = shared();
    let gateway = lab.gateway();
    // Every strategy the catalogue calls safe, taken from the catalogue.
    // Retries enough for db-optimistic to outlast the contention (the
    // others ignore the knob); its giving up is its own test above.
    // Each of a strategy's recipes too (zookeeper's Curator recipes).
    let safe = Catalogue::new().infos().into_iter().filter(|i| i.safe);
    let races = safe.flat_map(|info| {
        let recipes = std::iter::once(Recipe::default()).chain(info.recipes.iter().copied());
        recipes.map(move |recipe| (info.id, recipe))
    });
    for (i, (id, recipe)) in races.enumerate() {
        let product = 140 + i as i64;
        let settings = json!({"max_retries": 1000, "recipe": recipe});
        let row = race_on(&lab.audit(), &gateway, Race::crowd(product, id, settings)).await;
        assert!(row.sold <= 20 && row.oversold == 0, "{row:?}");
        assert_eq!(
            row.initial - row.remaining,
            row.sold,
            "no lost update: {row:?}"
        );
        // A slow path's adaptive limit turns part of the crowd away
        // `busy` at once, with nothing sold: the units they left sell to
        // buyers who come back one at a time, as told to.
        let sold = row.sold + come_back(&gateway, product, BACK).await;
        let ledger = gateway.ledger(product).await.expect("ledger");
        assert_eq!(
            (ledger.sold, sold, ledger.oversold, ledger.remaining),
            (20, 20, 0, 0),
            "{id} ({}) must sell exactly the stock: {row:?} then {ledger:?}",
            recipe.as_str()
        );
    }
}

/// How many buyers come back, one at a time, after a crowd turned away.
const BACK: usize = 100;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setnx_naive_oversells_when_work_outlives_the_ttl() {
    let lab = shared();
    // The lock expires after 50 ms; a buyer arriving 30 ms later than the
    // last takes it while the first still works, and the first one's
    // unconditional DEL frees it again. Fail-fast buyers must keep
    // arriving, so arrivals are paced, not burst.
    let settings = json!({"work_ms": 200, "lease_ms": 50});
    let pace = Some(Duration::from_millis(30));
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 130,
            strategy: "setnx-naive",
            stock: 3,
            buyers: 40,
            concurrency: 40,
            pace,
            settings,
        },
    )
    .await;
    assert!(
        row.oversold > 0,
        "setnx-naive must oversell past its TTL: {row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redissons_watchdog_keeps_a_long_holder_safe() {
    let lab = shared();
    // Work three times the lease: the watchdog renews it every lease/3.
    // The lease is long enough that a busy CI machine delaying a renewal
    // by half a second (a pause, which redisson cannot survive) does not
    // turn this test into the frozen-holder scenario.
    let settings = json!({"work_ms": 2400, "lease_ms": 800});
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 131,
            strategy: "redisson",
            stock: 2,
            buyers: 10,
            concurrency: 10,
            pace: None,
            settings,
        },
    )
    .await;
    assert_eq!(row.oversold, 0, "{row:?}");
    assert_eq!(row.sold, 2, "{row:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fencing_refuses_the_writes_of_expired_holders() {
    let lab = shared();
    // Same expiring lease as the setnx race: holders overlap, but a holder
    // older than the newest reader cannot write.
    let settings = json!({"work_ms": 200, "lease_ms": 50});
    let row = race_on(
        &lab.audit(),
        &lab.gateway(),
        Race {
            product: 132,
            strategy: "fenced",
            stock: 3,
            buyers: 40,
            concurrency: 20,
            pace: None,
            settings,
        },
    )
    .await;
    assert_eq!(row.oversold, 0, "{row:?}");
    assert_eq!(row.lost_updates, 0, "{row:?}");
    assert!(
        row.errors.get("busy").copied().unwrap_or(0) > 0,
        "stale holders are refused: {row:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_strategy_can_guard_a_postgres_row() {
    let lab = shared();
    let settings = json!({"store": "postgres"});
    let gateway = lab.gateway();
    let row = race_on(
        &lab.audit(),
        &gateway,
        Race::crowd(133, "redlock", settings),
    )
    .await;
    assert!(row.sold <= 20 && row.oversold == 0, "{row:?}");
    // Those its lock or its path's limit turned away `busy` come back.
    let sold = row.sold + come_back(&gateway, 133, BACK).await;
    let ledger = gateway.ledger(133).await.expect("ledger");
    assert_eq!(
        (ledger.sold, sold, ledger.oversold, ledger.remaining),
        (20, 20, 0, 0),
        "{row:?} then {ledger:?}"
    );
}
