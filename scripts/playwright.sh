#!/usr/bin/env bash
# playwright-core, pinned, under target/playwright (from the npm registry;
# it drives Debian's Chromium, so no browser is downloaded), then node on
# the given script with it: scripts/playwright.sh SCRIPT [ARGS…], or
# --install to install only. tests/labs/layout.rs measures pages with it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
version=1.64.1
dir="$root/target/playwright"

installed=$(node -p "require('$dir/node_modules/playwright-core/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$version" ]; then
  echo "installing playwright-core $version into $dir" >&2
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --silent "playwright-core@$version" >&2
fi

[ "${1:-}" = "--install" ] && exit 0
export NODE_PATH="$dir/node_modules"
exec node "$@"
