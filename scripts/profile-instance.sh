#!/usr/bin/env bash
# Where one instance spends its CPU while selling: a lab, wrk buying a
# redis-lua product with a new buyer per request, `perf record` on the
# first instance, and each sample put in one bucket by its innermost
# frame (the kernel, the allocator, hyper/axum, tokio, redis-rs, the
# order writer…). Needs perf and wrk (scripts/deps.sh installs wrk).
#   scripts/profile-instance.sh [binary] [seconds]
set -euo pipefail
bin=${1:-target/release/seckill}
secs=${2:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
coproc LAB { "$bin" lab --json 2>"$work/lab.err"; }
read -r info <&"${LAB[0]}"
field() { python3 -c "import json,sys; print(eval('json.loads(sys.argv[1])' + sys.argv[2]))" "$info" "$1"; }
gateway=$(field "['gateway_url']")
token=$(field "['admin_token']")
pid=$(field "['instances'][0]['pid']")
curl -sf -X PUT -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d '{"stock":100000000,"strategy":"redis-lua","per_user_limit":1}' "$gateway/admin/products/7" >/dev/null
cat >"$work/buy.lua" <<'LUA'
local threads, n = 0, 0
function setup(thread) threads = threads + 1; thread:set("id", threads) end
function request()
  n = n + 1
  return wrk.format("POST", "/stock/7/buy",
    {["X-User-Id"] = "p-" .. id .. "-" .. n .. "-" .. math.random(1, 1e9)})
end
LUA
wrk -t2 -c64 -d3s -s "$work/buy.lua" "$gateway" >/dev/null
wrk -t2 -c64 -d$((secs + 3))s -s "$work/buy.lua" "$gateway" >"$work/wrk.txt" &
load=$!
sleep 1
perf record -F 999 -g --call-graph dwarf,16384 -p "$pid" -o "$work/perf.data" -- sleep "$secs" 2>/dev/null
wait "$load"
grep Requests/sec "$work/wrk.txt"
kill -TERM "$LAB_PID"
wait "$LAB_PID" 2>/dev/null || true
perf script -i "$work/perf.data" 2>/dev/null | python3 -c '
import re, sys, collections
buckets, total = collections.Counter(), 0
for sample in sys.stdin.read().split("\n\n"):
    frames = [l.strip() for l in sample.strip().split("\n")[1:] if l.strip()]
    if not frames:
        continue
    total += 1
    m = re.match(r"[0-9a-f]+\s+(.*?)\s+\((.*)\)$", frames[0])
    sym, obj = (m.group(1), m.group(2)) if m else (frames[0], "?")
    stack = "\n".join(frames)
    if "kernel" in obj: key = "kernel (syscalls, TCP, scheduling)"
    elif sym.startswith(("mi_", "_mi_")): key = "allocator (mimalloc)"
    elif "memcpy" in sym or "memmove" in sym: key = "memcpy"
    elif "seckill::orders::writer" in stack: key = "order writer"
    elif "redis::" in stack and "seckill::sale" in stack: key = "redis-rs, on the sale"
    elif "redis::" in stack: key = "redis-rs, elsewhere (writer, live view)"
    elif "hyper::" in stack: key = "hyper/axum (HTTP)"
    elif "tokio::" in stack: key = "tokio (scheduler, I/O)"
    else: key = "other"
    buckets[key] += 1
print(f"{total} samples")
for key, n in buckets.most_common():
    print(f"{100 * n / total:5.1f} % {key}")
'
