//! Integration tests that each start a lab of their own (a Redis Cluster,
//! Sentinel, Prometheus, JMeter, Chromium, Schemathesis, the power-cut
//! filesystem): one binary, zero2prod's shape, so the crate is linked once
//! for all of them and their labs, which mostly wait on servers, run side
//! by side on the test threads. `tests/api` shares one lab instead;
//! `tests/scenarios.rs` runs one scenario at a time and stays apart.

mod cluster;
mod dashboard;
mod jmeter;
mod layout;
mod observe;
mod openapi;
mod powercut;
mod sentinel;
