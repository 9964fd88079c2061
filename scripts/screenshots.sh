#!/usr/bin/env bash
# Redraws the pictures in docs/ that docs/observability.md shows: the live page
# (docs/live.png at 1280 px, docs/live-375.png at 375 px) caught while a
# slow race runs beside finished ones (one oversold), and the report of a
# small comparison (docs/report.png). Run it after changing the page or the
# report; it starts its own lab (release build) and leaves nothing behind.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/release-lab.sh
shoot() { # width height file
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="$1,$2" \
    --virtual-time-budget=3000 --user-data-dir="$work/profile" --screenshot="$3" "$4" >/dev/null 2>&1
}

# Finished races: an unsafe strategy oversells, safe ones on Redis and on
# MySQL do not; they land in the report.
"${race[@]}" --strategies naive,redis-lua,db-atomic@mysql,zookeeper --stock 100 --buyers 1000 \
  --concurrency 100 --out "$work/report.json" >/dev/null
target/release/seckill report --input "$work/report.json" --out "$work/report.html" >/dev/null
shoot 1280 560 docs/report.png "file://$work/report.html"

# A slow race still running while the page is caught: 60 ms of work per
# sale under one lock.
"${race[@]}" --strategies redis-lock --first-product 9600 --stock 200 --buyers 400 \
  --concurrency 20 --work-ms 60 >/dev/null &
running=$!
sleep 6
shoot 1280 900 docs/live.png "$gateway/"
shoot 375 1400 docs/live-375.png "$gateway/"
kill "$running" 2>/dev/null || true
wait "$running" 2>/dev/null || true
echo "wrote docs/live.png docs/live-375.png docs/report.png"
