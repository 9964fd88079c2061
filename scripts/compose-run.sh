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

# The images the Dockerfile builds FROM first; then the cold build of
# seckill:latest (the compose file's own `build`, as `up --build` would
# run it; the test's `up --build` then finds every layer built) beside the
# other stand-ins, which wait mostly on downloads and dpkg: the build is
# the long pole, and the stand-ins no longer come before it.
start=$SECONDS
bash scripts/standins.sh $(awk '/^FROM /{print $2}' Dockerfile)
echo "the Dockerfile's base images ready in $((SECONDS - start)) s" >&2
SECKILL_ADMIN_TOKEN=build-only docker compose -f docker-compose.yml build --quiet app &
build=$!
bash scripts/standins.sh
echo "the other images ready in $((SECONDS - start)) s" >&2
wait "$build" || { echo "docker compose build app failed" >&2; exit 1; }
echo "seckill:latest built in $((SECONDS - start)) s" >&2

cargo test --locked --test compose -- --ignored --nocapture
