#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints, the
# unit and integration tests (which start their own Redis, PostgreSQL,
# instances and nginx on free loopback ports), validates the compose file
# with each of its profiles, and brings it up for real (scripts/compose-run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --locked
compose=$(bash scripts/compose-plugin.sh --path)
for profile in default cluster jmeter observe; do
  SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml --profile "$profile" config -q
done
SECKILL_ADMIN_TOKEN=validation-only "$compose" -f docker-compose.yml -f compose.token.yml config -q
# And up for real, on an engine of its own (docs/running.md#compose).
bash scripts/compose-run.sh
echo "all checks passed"
