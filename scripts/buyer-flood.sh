#!/usr/bin/env bash
# What a flood of distinct buyer ids costs the instances' memory: a
# sold-out `segmented` product with a per-buyer limit (every try claims a
# unit at home and gives it back, the per-buyer bucket sees a new key each
# request), wrk straight at both instances of a release lab for SECS
# seconds with a fresh X-User-Id per request. Prints the instances' RSS
# (summed) before, at its peak during the flood, and IDLE seconds after
# it, the requests sent, and how many fields the product's buyer counts
# hold in Redis at the end. Environment: SECS (default 60), IDLE (default
# 15).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${SECS:-60}
idle=${IDLE:-15}

source scripts/release-lab.sh
token=$(field admin_token)
redis_url=$(field redis_url)
read -r -a urls < <(python3 -c "import json,sys; print(' '.join(i['url'] for i in json.load(open(sys.argv[1]))['instances']))" "$work/lab.json")
read -r -a pids < <(python3 -c "import json,sys; print(' '.join(str(i['pid']) for i in json.load(open(sys.argv[1]))['instances']))" "$work/lab.json")
product=9800
curl -sf -X PUT -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"stock":1,"strategy":"segmented","segments":1,"per_user_limit":1}' \
  "$gateway/admin/products/$product" >/dev/null
curl -sf -X POST -H 'X-User-Id: first' "$gateway/stock/$product/buy" >/dev/null

rss_mib() {
  local kib=0
  for pid in "${pids[@]}"; do
    kib=$((kib + $(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")))
  done
  echo $((kib / 1024))
}

cat >"$work/flood.lua" <<LUA
local n = 0
local tag = tostring(math.random(1, 1e9))
function request()
  n = n + 1
  return wrk.format("POST", "/stock/$product/buy", {["X-User-Id"] = "f-" .. tag .. "-" .. n})
end
LUA
before=$(rss_mib)
for url in "${urls[@]}"; do
  wrk -t1 -c32 -d"${secs}s" -s "$work/flood.lua" "$url" >"$work/wrk-${url##*:}.txt" &
done
peak=$before
for _ in $(seq 1 "$secs"); do
  sleep 1
  now=$(rss_mib)
  [ "$now" -gt "$peak" ] && peak=$now
done
wait $(jobs -p | grep -v "^$lab$") 2>/dev/null || true
sleep "$idle"
after=$(rss_mib)
sent=$(cat "$work"/wrk-*.txt | awk '/requests in/ {n += $1} END {print n}')
buyers_key=$(redis-cli -u "$redis_url" --scan --pattern "seckill:*:$product:buyers" | head -1)
fields=$(redis-cli -u "$redis_url" HLEN "$buyers_key")
echo "distinct buyers sent: $sent in ${secs}s"
echo "instances' RSS: before $before MiB, peak $peak MiB (+$((peak - before))), ${idle}s idle after $after MiB (+$((after - before)))"
echo "buyer-count fields left in Redis: $fields"
