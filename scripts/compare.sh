#!/usr/bin/env bash
# The main job: builds a release binary, brings up the whole topology
# natively (Redis, PostgreSQL, MariaDB, ZooKeeper, etcd, 2 instances,
# nginx), races every strategy (each of its recipes, and a database
# strategy on the other database too) and prints the comparison (also
# written to compare.json, and drawn in compare.html), then the give-back
# mechanisms of an order's life side by side: a late payment under each,
# on Redis, PostgreSQL and MySQL stock (compare-giveback.json;
# docs/order-life.md). Extra arguments go to the first `seckill race` (see
# `seckill race --help`); with --scenario, it is the only run.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cargo build --release --locked
status=0
target/release/seckill race --instances 2 --out compare.json --report compare.html "$@" || status=$?
case " $* " in *" --scenario"*) exit "$status" ;; esac
echo
echo "The give-back mechanisms side by side: a payment landing inside the give-back's pause"
target/release/seckill race --scenario late-payment --out compare-giveback.json || status=$?
exit "$status"
