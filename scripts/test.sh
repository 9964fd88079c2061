#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints, the
# unit and integration tests (which start their own Redis, PostgreSQL,
# instances and nginx on free loopback ports), validates the compose file
# with each of its profiles, and brings it up for real (scripts/compose-run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
# The compose run's engine and images, made while the crate compiles: the
# stand-ins are mostly downloads and unpacking, the compile is CPU. They
# are ready before any test starts, so no test shares the cores with them.
bash scripts/compose-plugin.sh --install >/dev/null
source scripts/docker-engine.sh
export SECKILL_ENGINE_DIR
SECKILL_ENGINE_DIR=$(mktemp -d /tmp/seckill-engine.XXXXXX)
trap 'engine_stop "$SECKILL_ENGINE_DIR"' EXIT
engine_start "$SECKILL_ENGINE_DIR"
bash scripts/standins.sh 2>"$SECKILL_ENGINE_DIR/standins.log" &
standins=$!
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --locked --no-run
wait "$standins" || { cat "$SECKILL_ENGINE_DIR/standins.log" >&2; exit 1; }
cat "$SECKILL_ENGINE_DIR/standins.log" >&2
cargo test --locked
compose=$(bash scripts/compose-plugin.sh --path)
for profile in default cluster jmeter observe; do
  SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml --profile "$profile" config -q
done
SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml -f compose.token.yml config -q
# And up for real, on an engine of its own (docs/running.md#compose).
bash scripts/compose-run.sh
echo "all checks passed"
