#!/usr/bin/env bash
# bench-ab.sh measures two builds of schemaless against each other the way BENCHMARKS.md
# compares them: node processes from a fresh `schemaless dev` cluster per run
# (scripts/bench-external.sh), the builds alternated (A B A B ...) so that the machine's drift
# touches both alike, raft-raw in the same invocations. Per round and build:
#
#   put     put_cell, 64 and 1 clients, Go and plain client, beside raft-raw
#   batch   put_cells of 100, 16 clients, Go and plain client, beside raft-raw
#   read    get_cell_latest, 64 clients, stale and strong, Go and plain client
#   idle    an idle 3-node cluster: CPU of its processes over IDLE_SECONDS, from 10 s after ready
#   import  `schemaless dev --import` of the 100,000-flight sample with triggers, index and schema
#           on (the `make run` import): its summary and catch-up lines
#
#   A=/tmp/schemaless-before B=bin/schemaless scripts/bench-ab.sh
#
# Environment (defaults in brackets):
#   A, B          the two binaries (required)
#   ROUNDS        rounds of A then B [2]
#   RUNS          which of the above [put batch read idle import]
#   DURATION      measured time of each bench run [10s]
#   IDLE_SECONDS  [30]
#   OUT           results, one file per round, build and run [.data/bench-ab]
set -euo pipefail
cd "$(dirname "$0")/.."

: "${A:?A: the first binary}" "${B:?B: the second binary}"
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-put batch read idle import}
DURATION=${DURATION:-10s}
IDLE_SECONDS=${IDLE_SECONDS:-30}
OUT=${OUT:-.data/bench-ab}
mkdir -p "$OUT"
ticks=$(getconf CLK_TCK)

# cpu_ticks prints the user+system ticks of the processes in $1 (comma-separated pids).
cpu_ticks() {
  local sum=0 pid
  for pid in ${1//,/ }; do
    read -r -a f <"/proc/$pid/stat"
    sum=$((sum + f[13] + f[14]))
  done
  echo "$sum"
}

# idle runs a fresh dev cluster of binary $1 with nothing to do and prints the cores it uses.
idle() {
  local bin=$1 data log pids t0 t1
  data=$(mktemp -d /tmp/schemaless-idle-XXXXXX)
  log="$data.log"
  "$bin" dev --data-dir "$data" --fresh --triggers=false --indexes=false --schema=false \
    --http-port 27470 --raft-port 27570 --admin-port 27770 >"$log" 2>&1 &
  local dev=$!
  for _ in $(seq 1 120); do grep -q '^ready: ' "$log" && break; sleep 0.5; done
  sleep 10
  pids=$(pgrep -d, -f -- "serve .*$data")
  t0=$(cpu_ticks "$pids")
  sleep "$IDLE_SECONDS"
  t1=$(cpu_ticks "$pids")
  kill -INT "$dev"
  wait "$dev" || true
  rm -rf "$data" "$log"
  awk -v d=$((t1 - t0)) -v hz="$ticks" -v s="$IDLE_SECONDS" 'BEGIN { printf "idle: %.3f cores (3 nodes, %d s)\n", d / hz / s, s }'
}

# import runs the make-run import on a fresh cluster of binary $1, until it prints its example
# curls, and prints what it reported of the import and the catch-up of triggers and index.
import() {
  local bin=$1 data log
  data=$(mktemp -d /tmp/schemaless-import-XXXXXX)
  log="$data.log"
  "$bin" dev --data-dir "$data" --fresh --quiet --import testdata/flights-100k.csv.gz \
    --http-port 27470 --raft-port 27570 >"$log" 2>&1 &
  local dev=$!
  for _ in $(seq 1 900); do
    grep -q 'curl -s http' "$log" && break
    kill -0 "$dev" 2>/dev/null || break
    sleep 1
  done
  kill -INT "$dev" 2>/dev/null || true
  wait "$dev" || true
  grep -E '^imported|caught up|every flight indexed' "$log" | cut -c1-200 || true
  rm -rf "$data" "$log"
}

for round in $(seq 1 "$ROUNDS"); do
  for which in A B; do
    bin=${!which}
    for run in $RUNS; do
      f="$OUT/$round-$which-$run.txt"
      echo "== round $round, $which ($bin), $run" | tee "$f"
      case $run in
      put) BIN=$bin SKIP_BUILD=1 scripts/bench-external.sh --workload put --clients 64,1 --client go,plain --duration "$DURATION" >>"$f" 2>&1 ;;
      batch) BIN=$bin SKIP_BUILD=1 scripts/bench-external.sh --workload put-batch --batch 100 --clients 16 --client go,plain --duration "$DURATION" >>"$f" 2>&1 ;;
      read) BIN=$bin SKIP_BUILD=1 BASELINE= scripts/bench-external.sh --workload get-latest --clients 64 --consistency stale,strong --client go,plain --duration "$DURATION" >>"$f" 2>&1 ;;
      idle) idle "$bin" >>"$f" 2>&1 ;;
      import) import "$bin" >>"$f" 2>&1 ;;
      *) echo "bench-ab: unknown run $run" >&2; exit 2 ;;
      esac
      grep -E '^\s+(external|raft-raw) |^idle:|^imported|caught up|indexed' "$f" | cut -c1-160 || true
    done
  done
done
