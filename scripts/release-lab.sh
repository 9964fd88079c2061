# Sourced by the measuring scripts (live-cost.sh, screenshots.sh,
# buyer-flood.sh): builds the release binary, starts a 2-instance lab in
# the background and waits for its line. Sets `work` (a scratch directory,
# removed on exit), `gateway`, `race` (a `seckill race` command line
# against the lab), `bin` (the binary) and `field NAME` (one value of the
# lab's line). A caller with more to clean up on exit defines
# `before_exit` first. SECKILL_BIN runs another build instead (an older
# one, for a before and after) and skips the build.
bash scripts/deps.sh
bin=${SECKILL_BIN:-target/release/seckill}
[ -n "${SECKILL_BIN:-}" ] || cargo build --release --locked
work=$(mktemp -d)
"$bin" lab --instances 2 --json >"$work/lab.json" &
lab=$!
cleanup() {
  if declare -F before_exit >/dev/null; then before_exit; fi
  kill "$lab" 2>/dev/null
  wait "$lab" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
until [ -s "$work/lab.json" ]; do
  kill -0 "$lab" 2>/dev/null || { echo "the lab did not start" >&2; exit 1; }
  sleep 0.5
done
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/lab.json" "$1"; }
gateway=$(field gateway_url)
race=("$bin" race --url "$gateway" --admin-token "$(field admin_token)"
  --database-url "$(field postgres_url)" --mysql-url "$(field mysql_url)")
