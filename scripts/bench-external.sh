#!/usr/bin/env bash
# bench-external.sh measures the datastore as users deploy it: a fresh `schemaless dev` cluster
# (three `schemaless serve` processes on dev's default store, pebble, triggers, index and schema
# off unless DEV_ARGS says otherwise: DEV_ARGS='--store sqlite ...' for SQLite) and `schemaless bench --target external` in a process of its own, with the CPU
# of the three node processes counted (--cpu-pid) and `raft-raw` with the same log store as the
# baseline of the same invocation. With PROFILE=N it also takes an N-second CPU profile of each
# node (/debug/pprof/profile on its admin port) while the bench runs, saved as
# $OUT/node-{0,1,2}.pprof. The nodes' logs are copied to $OUT (n1.log, ...) when the cluster stops.
#
#   scripts/bench-external.sh --workload put --clients 64,1 --client go,plain
#
# The arguments are passed to `schemaless bench` after the target, endpoints, CPU pids and
# baseline (add --baseline '' to skip the baseline). Environment (defaults in brackets):
#   BIN       the schemaless binary [bin/schemaless], built first unless SKIP_BUILD=1
#   BENCH_BIN the binary that runs the bench [$BIN]: to compare two builds of the nodes with
#             one build of the bench
#   PORT      first HTTP port of the cluster [27070] (raft +100, gossip +200, admin +300)
#   OUT       where the profiles, the dev log and the bench output go [.data/bench-external]
#   DEV_ARGS  extra flags of `schemaless dev` [--triggers=false --indexes=false --schema=false]
#   PROFILE   seconds of CPU profile per node, 0 for none [0]
#   BASELINE  the bench's --baseline [raft-raw]
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin/schemaless}
BENCH_BIN=${BENCH_BIN:-$BIN}
PORT=${PORT:-27070}
OUT=${OUT:-.data/bench-external}
DEV_ARGS=${DEV_ARGS:---triggers=false --indexes=false --schema=false}
PROFILE=${PROFILE:-0}
BASELINE=${BASELINE-raft-raw}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  go build -o "$BIN" ./cmd/schemaless
fi
mkdir -p "$OUT"
data=$(mktemp -d /tmp/schemaless-bench-XXXXXX)
# shellcheck disable=SC2086
"$BIN" dev --data-dir "$data" --fresh $DEV_ARGS --http-port "$PORT" --raft-port $((PORT + 100)) \
  --admin-port $((PORT + 300)) >"$OUT/dev.log" 2>&1 &
dev=$!
cleanup() {
  kill -INT "$dev" 2>/dev/null || true
  wait "$dev" 2>/dev/null || true
  cp "$data"/*.log "$OUT"/ 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  grep -q '^ready: ' "$OUT/dev.log" && break
  kill -0 "$dev" 2>/dev/null || { cat "$OUT/dev.log" >&2; exit 1; }
  sleep 0.5
done
grep -q '^ready: ' "$OUT/dev.log" || { echo "bench-external: the cluster did not become ready" >&2; exit 1; }
pids=$(pgrep -d, -f -- "serve .*$data" || true)
[ -n "$pids" ] || { echo "bench-external: no serve process of $data found" >&2; exit 1; }
endpoints="http://127.0.0.1:$PORT,http://127.0.0.1:$((PORT + 1)),http://127.0.0.1:$((PORT + 2))"
echo "+ $BENCH_BIN bench --target external --endpoints $endpoints --cpu-pid $pids --baseline '$BASELINE' $*" >&2
prof=
if [ "$PROFILE" -gt 0 ]; then
  (
    sleep 3
    for i in 0 1 2; do
      curl -sf -o "$OUT/node-$i.pprof" "http://127.0.0.1:$((PORT + 300 + i))/debug/pprof/profile?seconds=$PROFILE" &
    done
    wait
  ) &
  prof=$!
fi
"$BENCH_BIN" bench --target external --endpoints "$endpoints" --cpu-pid "$pids" --baseline "$BASELINE" "$@" 2>&1 | tee "$OUT/bench.txt"
[ -z "$prof" ] || wait "$prof"
