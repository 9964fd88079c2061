#!/usr/bin/env bash
# The compose run: docker-compose.yml brought up for real, the way the
# README tells a user to (`docker compose up --build`, the JMeter profile,
# --scale, the cluster and observe profiles, buyer tokens, down -v), with
# tests/compose/run.rs asserting what each step must give.
#
# It runs on a Docker engine of its own (scripts/docker-engine.sh: its own
# data root, state, socket and pid file under a temporary directory, stopped
# at the end; never a user's daemon) with Compose v2 pinned
# (scripts/compose-plugin.sh), and makes the images the compose file names
# exist first (scripts/standins.sh: pulled where a registry is reachable,
# built from Debian's packages where not). scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v dockerd >/dev/null || { echo "dockerd not found: scripts/deps.sh installs docker.io" >&2; exit 1; }
bash scripts/compose-plugin.sh --install >/dev/null
source scripts/docker-engine.sh
work=$(mktemp -d /tmp/seckill-engine.XXXXXX)
trap 'engine_stop "$work"' EXIT
engine_start "$work"

start=$SECONDS
bash scripts/standins.sh
echo "images ready in $((SECONDS - start)) s" >&2

cargo test --locked --test compose -- --ignored --nocapture
