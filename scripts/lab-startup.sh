#!/usr/bin/env bash
# Times `seckill lab --json` from its start to its ready line (every
# backend answering), N times: what every test binary and
# scripts/compare.sh wait for before anything runs.
#   scripts/lab-startup.sh [binary] [runs] [instances]
set -euo pipefail
bin=${1:-target/debug/seckill}
runs=${2:-3}
instances=${3:-0}
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  coproc LAB { "$bin" lab --json --instances "$instances" 2>/dev/null; }
  read -r _line <&"${LAB[0]}"
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  printf '%d.%03d s\n' $((ms / 1000)) $((ms % 1000))
  kill -TERM "$LAB_PID"
  wait "$LAB_PID" 2>/dev/null || true
done
