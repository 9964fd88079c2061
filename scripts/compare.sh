#!/usr/bin/env bash
# The main job: builds a release binary, brings up the whole topology
# natively (Redis, PostgreSQL, MariaDB, ZooKeeper, etcd, 2 instances,
# nginx), races every strategy (each of its recipes, and a database
# strategy on the other database too) and prints the comparison (also
# written to compare.json, and drawn in compare.html). Extra arguments go to `seckill race` (see `seckill race
# --help`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cargo build --release --locked
exec target/release/seckill race --instances 2 --json compare.json --report compare.html "$@"
