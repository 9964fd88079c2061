#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints, the
# unit and integration tests (which start their own Redis, PostgreSQL,
# instances and nginx on free loopback ports), validates the compose file
# with each of its profiles, and brings it up for real (scripts/compose-run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
# The compose run's images — its stand-ins, and the seckill image built
# cold from this clone — made in the background on an engine of this run's
# own at the lowest CPU and I/O priority: the compile and the tests take
# the cores whenever they want them (the tests mostly wait: leases, pacing,
# faults), the images what is left.
bash scripts/compose-plugin.sh --install >/dev/null
source scripts/docker-engine.sh
export SECKILL_ENGINE_DIR
SECKILL_ENGINE_DIR=$(mktemp -d /tmp/seckill-engine.XXXXXX)
trap 'engine_stop "$SECKILL_ENGINE_DIR"' EXIT
engine_start "$SECKILL_ENGINE_DIR" 19
images_log=$SECKILL_ENGINE_DIR/images.log
{
  start=$SECONDS
  bash scripts/standins.sh
  SECKILL_ADMIN_TOKEN=build-only docker compose -f docker-compose.yml build --quiet
  echo "images (stand-ins and seckill:latest) built in the background in $((SECONDS - start)) s"
} >"$images_log" 2>&1 &
images=$!
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --locked
wait "$images" || { cat "$images_log" >&2; exit 1; }
cat "$images_log" >&2
compose=$(bash scripts/compose-plugin.sh --path)
for profile in default cluster jmeter observe; do
  SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml --profile "$profile" config -q
done
SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml -f compose.token.yml config -q
# And up for real, on that engine (docs/running.md#compose).
bash scripts/compose-run.sh
echo "all checks passed"
