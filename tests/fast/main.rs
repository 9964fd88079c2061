//! The fast tier: what a developer runs between edits, in well under a
//! minute (`cargo test --lib --test fast`). One lab with the backends only
//! (Redis ×3, PostgreSQL, MariaDB, ZooKeeper, etcd; no instances, no
//! nginx), and the router driven in-process with
//! `tower::ServiceExt::oneshot` — the same router an instance serves,
//! against the same real servers, without starting processes per test. The full suite (`scripts/test.sh`) adds
//! the races through nginx, the scenarios, JMeter, Chromium and compose.

use seckill_harness as harness;

mod app;
mod clock;
mod contract;
mod generated;
mod refusals;
mod shape;
