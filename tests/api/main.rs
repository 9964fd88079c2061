//! Integration tests against real servers: every test module builds into
//! this one binary so they share one lab (Redis, PostgreSQL, two instances,
//! nginx), started by `seckill lab --json` — the same code users run.
//! Tests isolate their data by product id.

use seckill_harness as harness;

mod contract;
mod edge;
mod failover;
mod history;
mod hostile;
mod idempotency;
mod identity;
mod life;
mod limits;
mod locks;
mod metrics;
mod mysql;
mod prebooking;
mod races;
mod restock;
mod shutdown;
mod soldout;
mod waves;
mod window;
mod writer;
