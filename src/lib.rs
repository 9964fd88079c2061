//! seckill: a flash-sale inventory backend and a laboratory of the ways to
//! protect a hot stock counter.
//!
//! Map of the crate, by layer. Dependencies point down only (a module
//! `use`s its own layer or a lower one), so each layer reads and tests on
//! its own; docs/architecture.md has the picture.
//!
//! **Ground** — data and handles, no knowledge of selling:
//! - [`product`]: products, their [`product::Settings`] and Redis key names;
//! - [`info`]: what the catalogue says about a strategy and what it is
//!   expected to do under each hazard;
//! - [`backends`]: the Redis, PostgreSQL, MySQL, RedLock, ZooKeeper and
//!   etcd handles, and the [`backends::Footprint`] a product leaves in
//!   them;
//! - [`orders`]: what a sale records, and the writer that moves Redis-sold
//!   orders into PostgreSQL;
//! - [`sale`]: the seam between selling and storing — what one buy
//!   carries ([`sale::BuyCtx`]), what a store offers it ([`sale::Store`])
//!   and what a database offers the SQL strategies ([`sale::Rows`]);
//! - [`error`]: the errors and the status table in one place;
//!   [`telemetry`] the metrics; [`backoff`] retry pacing.
//!
//! **Selling** — how a unit is sold:
//! - [`lock`]: the locks; [`store`]: one file per store (Redis,
//!   PostgreSQL, MySQL) behind [`sale::Store`], and each database's
//!   statements behind [`sale::Rows`]; [`limit`]: the per-buyer limit;
//! - [`strategy`]: the ways to sell a unit (locked ones compose a lock with
//!   the shared critical section) and their [`strategy::Catalogue`].
//!
//! **Service** — one instance:
//! - [`products`]: the product store (load on the buy path, reset
//!   everywhere); [`ledger`]: counts orders honestly;
//!   [`idempotency`], [`soldout`], [`edge`], [`reservation`], [`auth`]:
//!   the buy path's guards (who is buying among them); [`purchase`]: the sale as one use case (admit, the
//!   sold-out flag, waves, idempotency, the sale's task);
//!   [`waves`]: the stock released wave by wave;
//!   [`placement`]: where a product's counters are; [`live`]: the live
//!   view's counts; [`chart`]: the comparison drawn as SVG;
//! - [`http`]: the routes and their OpenAPI document; [`serve`]: pools,
//!   migrations, writer, server.
//!
//! **Tools** — start things, drive load, judge:
//! - [`lab`]: the whole topology natively, for users and tests alike;
//! - [`race`]: the load driver, the comparison and the scenarios;
//!   [`bench`]: sustained throughput against baselines; [`check`]: the
//!   history checker;
//! - [`report`]: a race as an HTML page; [`generated`]: the README's
//!   strategy table and JMeter's CSV, from the catalogue; [`cli`]: the
//!   command line.

pub mod auth;
pub mod backends;
pub mod backoff;
pub mod bench;
pub mod buy_path;
pub mod chart;
pub mod check;
pub mod cli;
pub mod edge;
pub mod error;
pub mod generated;
pub mod http;
pub mod idempotency;
pub mod info;
pub mod lab;
pub mod ledger;
pub mod life;
pub mod limit;
pub mod live;
pub mod lock;
pub mod orders;
pub mod placement;
pub mod product;
pub mod products;
pub mod purchase;
pub mod race;
pub mod report;
pub mod reservation;
pub mod sale;
pub mod serve;
pub mod soldout;
pub mod store;
pub mod strategy;
pub mod telemetry;
pub mod waves;
