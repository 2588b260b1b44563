#!/usr/bin/env bash
# bench-goals.sh runs the measurements behind the goals table of BENCHMARKS.md, one after the
# other (so that they never share the machine with each other), and keeps each one's table and
# JSON lines under $DATA_DIR:
#
#   put        put_cell, 1 and 64 clients, sqlite and mysql targets, baselines raft-noop and
#              mysql; then sqlite beside raft-raw, with the default raft log and with the node's
#              shared one (--raft-log-store node)
#   batch      put_cells of 100, 1, 4 and 16 clients, the same targets and baselines
#   read       get_cell_latest stale and strong, 16 and 64 clients, sqlite
#   index      index lag at 2,000 put_cell/s (index-lag), sqlite
#   trigger    trigger latency at 1,000 put_cell/s (trigger-latency), sqlite
#   trips      the trips workload on 'schemaless dev' (three processes) after loading
#              $TRIPS_FLIGHTS flights, with the nodes' RSS scraped from /metrics, and each
#              node's resident memory split by scripts/rss-breakdown.sh at the end
#              (trips-memory.txt)
#
# Environment (defaults in brackets):
#   RUNS       which of the above, space- or comma-separated [put batch read index trigger trips]
#   BIN        the schemaless binary [bin/schemaless], built first unless SKIP_BUILD=1
#   DURATION   measured time of each run [10s]
#   DATA_DIR   results [.data/bench-goals]
#   TRIPS_FLIGHTS  flights loaded by the trips run [3000000]
#   TRIPS_FILE     [../shared/datasets/flights-3m.csv.gz]
#   TRIPS_LOG_STORE  raft log format of the trips run's nodes: auto, node, wal or bolt [auto]
#   DEV_PORT   first HTTP port of the dev cluster of the trips run [27070] (raft: +100,
#              gossip: +200, admin: +300)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-put batch read index trigger trips}
RUNS=${RUNS//,/ }
BIN=${BIN:-bin/schemaless}
DURATION=${DURATION:-10s}
DATA_DIR=${DATA_DIR:-.data/bench-goals}
TRIPS_FLIGHTS=${TRIPS_FLIGHTS:-3000000}
TRIPS_FILE=${TRIPS_FILE:-../shared/datasets/flights-3m.csv.gz}
TRIPS_LOG_STORE=${TRIPS_LOG_STORE:-auto}
DEV_PORT=${DEV_PORT:-27070}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  make build
fi
mkdir -p "$DATA_DIR"
{
  echo "# $(date -u +%FT%TZ) $(uname -srm), $(nproc) CPUs, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
} >>"$DATA_DIR/commands.txt"

# run NAME ARGS...: one bench invocation, its table in NAME.txt (stderr progress included).
run() {
  local name=$1
  shift
  echo "+ $BIN bench $*" | tee -a "$DATA_DIR/commands.txt" >&2
  "$BIN" bench "$@" 2>&1 | tee "$DATA_DIR/$name.txt"
}

for r in $RUNS; do
  case $r in
  put)
    run put --target sqlite,mysql --baseline raft-noop,mysql --workload put --clients 1,64 --duration "$DURATION"
    run put-raw --target sqlite --baseline raft-raw --workload put --clients 1,64 --duration "$DURATION"
    run put-node --target sqlite --baseline raft-raw --raft-log-store node --workload put --clients 1,64 --duration "$DURATION"
    ;;
  batch)
    run batch --target sqlite,mysql --baseline raft-noop,mysql --workload put-batch --batch 100 --clients 1,4,16 --duration "$DURATION"
    run batch-raw --target sqlite --baseline raft-raw --workload put-batch --batch 100 --clients 1,4,16 --duration "$DURATION"
    run batch-node --target sqlite --baseline raft-raw --raft-log-store node --workload put-batch --batch 100 --clients 1,4,16 --duration "$DURATION"
    ;;
  read)
    run read --target sqlite --workload get-latest --consistency stale,strong --clients 16,64 --duration "$DURATION"
    ;;
  index)
    run index --target sqlite --workload index-lag --rate 2000 --duration "$DURATION"
    ;;
  trigger)
    run trigger --target sqlite --workload trigger-latency --rate 1000 --duration "$DURATION"
    ;;
  trips)
    dir=$(mktemp -d /tmp/schemaless-trips-XXXXXX)
    echo "+ $BIN dev --fresh --data-dir $dir --http-port $DEV_PORT --raft-port $((DEV_PORT + 100)) --admin-port $((DEV_PORT + 300)) --raft-log-store $TRIPS_LOG_STORE --triggers=false --import ''" | tee -a "$DATA_DIR/commands.txt" >&2
    "$BIN" dev --fresh --data-dir "$dir" --http-port "$DEV_PORT" --raft-port $((DEV_PORT + 100)) --admin-port $((DEV_PORT + 300)) \
      --raft-log-store "$TRIPS_LOG_STORE" --triggers=false --import '' >"$DATA_DIR/trips-dev.log" 2>&1 &
    dev=$!
    trap 'kill $dev 2>/dev/null; wait $dev 2>/dev/null; rm -rf "$dir"' EXIT
    for _ in $(seq 1 60); do
      curl -fs "http://127.0.0.1:$DEV_PORT/readyz" >/dev/null 2>&1 && break
      sleep 1
    done
    eps="http://127.0.0.1:$DEV_PORT,http://127.0.0.1:$((DEV_PORT + 1)),http://127.0.0.1:$((DEV_PORT + 2))"
    run trips --target external --endpoints "$eps" --workload trips --flights "$TRIPS_FILE" \
      --trips-flights "$TRIPS_FLIGHTS" --clients 16 --duration "${TRIPS_DURATION:-30s}"
    for i in 1 2 3; do
      pid=$(pgrep -f -- "--data-dir $dir/n$i " | head -1) || continue
      echo "--- n$i (pid $pid)"
      scripts/rss-breakdown.sh "$pid" "http://127.0.0.1:$((DEV_PORT + 299 + i))/metrics"
    done | tee "$DATA_DIR/trips-memory.txt"
    kill $dev 2>/dev/null || true
    wait $dev 2>/dev/null || true
    rm -rf "$dir"
    trap - EXIT
    ;;
  *)
    echo "bench-goals: unknown run $r" >&2
    exit 2
    ;;
  esac
done
