#!/usr/bin/env bash
# What the live page costs the service: the same sustained race (every buy
# a sale, `redis-lua`, through nginx to 2 instances) with the page open in
# headless Chromium and with it closed, alternating, in one lab; prints
# each round's requests per second and the open/closed ratio of the
# medians, the rounds in ABBA order. The page reads GET /live once a
# second for as long as it is open; Chromium runs on the same machine, so
# its own CPU is counted against the service too. Environment: ROUNDS (default 4), BUYERS per race (default 20000),
# CONCURRENCY (default 200).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-4}
buyers=${BUYERS:-20000}
concurrency=${CONCURRENCY:-200}

browser=""
before_exit() { if [ -n "$browser" ]; then kill "$browser" 2>/dev/null; fi; }
source scripts/release-lab.sh
race+=(--strategies redis-lua --stock "$buyers" --buyers "$buyers" --concurrency "$concurrency")

product=9700
printf '%-6s %-7s %10s\n' round page rps
for round in $(seq 1 "$rounds"); do
  # ABBA: the order flips every round, so a drift over the run (a growing
  # orders table, a warming cache) does not fall on one side.
  order="closed open"
  [ $((round % 2)) -eq 0 ] && order="open closed"
  for page in $order; do
    if [ "$page" = open ]; then
      chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$work/profile" \
        --remote-debugging-port=0 "$gateway/" >/dev/null 2>&1 &
      browser=$!
      sleep 3 # the page loaded and polling
    fi
    product=$((product + 1))
    "${race[@]}" --first-product "$product" --out "$work/$round-$page.json" >/dev/null
    rps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))[0]['rps']))" "$work/$round-$page.json")
    printf '%-6s %-7s %10s\n' "$round" "$page" "$rps"
    echo "$rps" >>"$work/$page.rps"
    if [ -n "$browser" ]; then
      kill "$browser" 2>/dev/null
      wait "$browser" 2>/dev/null || true
      browser=""
    fi
  done
done
python3 - "$work/closed.rps" "$work/open.rps" <<'EOF'
import statistics, sys
closed, opened = ([float(x) for x in open(f)] for f in sys.argv[1:])
c, o = statistics.median(closed), statistics.median(opened)
print(f"median rps: page closed {c:.0f}, page open {o:.0f}; open/closed = {o / c:.3f}")
EOF
