#!/usr/bin/env bash
# The main job: builds a release binary, brings up the whole topology
# natively (Redis, PostgreSQL, ZooKeeper, etcd, 2 instances, nginx), races
# every strategy (and each of its recipes) and prints the comparison (also
# written to compare.json, and drawn in compare.html). Extra arguments go to `seckill race` (see `seckill race
# --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cargo build --release --locked
exec target/release/seckill race --instances 2 --json compare.json --report compare.html "$@"
