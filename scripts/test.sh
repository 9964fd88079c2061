#!/usr/bin/env bash
# The test command: installs what is missing, then formatting, lints, the
# unit and integration tests (which start their own Redis, PostgreSQL,
# instances and nginx on free loopback ports), and validates the compose file
# with each of its profiles.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --locked
SECKILL_ADMIN_TOKEN=validation-only docker-compose -f docker-compose.yml config -q
for profile in cluster jmeter observe; do
  SECKILL_ADMIN_TOKEN=validation-only docker-compose -f docker-compose.yml --profile "$profile" config -q
done
echo "all checks passed"
