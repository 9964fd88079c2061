#!/usr/bin/env bash
# Schemathesis against seckill's OpenAPI document, with the project's
# settings and hooks (tests/schemathesis/).
#
#   scripts/schemathesis.sh --install            install only
#   scripts/schemathesis.sh URL [st run options]  e.g.
#   scripts/schemathesis.sh http://127.0.0.1:8080/openapi.json \
#       -H "Authorization: Bearer $SECKILL_ADMIN_TOKEN"
#
# A pinned Schemathesis lives in a virtualenv under target/ (ignored by
# git, gone with `cargo clean`), installed from PyPI only when missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=4.32.5
venv="$root/target/schemathesis"

if [ "$("$venv/bin/st" --version 2>/dev/null)" != "st, version $version" ]; then
  echo "installing schemathesis $version into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi

[ "${1:-}" = "--install" ] && exit 0
url="${1:?usage: scripts/schemathesis.sh URL-of-openapi.json [st run options]}"
shift
export SCHEMATHESIS_HOOKS="$root/tests/schemathesis/hooks.py"
exec "$venv/bin/st" --config-file "$root/tests/schemathesis/schemathesis.toml" run "$url" "$@"
