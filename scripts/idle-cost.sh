#!/usr/bin/env bash
# idle-cost.sh measures what idle partitions cost on node processes as users deploy them: for
# each partition count given (default 4 64 256), a fresh `schemaless dev --partitions N --shards
# max(64,N)` cluster (three `schemaless serve` processes, every node a replica of every
# partition; triggers, indexes and schemas off), nothing sent to it; WAIT seconds after its
# ready line (default 20), it reads the user+system CPU of the three processes over WINDOW
# seconds (default 30; /proc/<pid>/stat fields 14 and 15), their RSS (/proc/<pid>/status VmRSS)
# and their goroutines (/debug/pprof/goroutine?debug=1 on the admin ports), and prints one row
# per count: cores used by the three together, RSS and goroutines per node, and per idle
# replica (the node's figures divided by its replicas).
#
# DEV_ARGS are extra `schemaless dev` flags, e.g. DEV_ARGS="--quiesce-after 0" for partitions
# that never quiesce. PAUSE_ONE=1 stops the third node (SIGSTOP: gossip then declares it dead, and
# dev, which stops when a node exits, keeps running) right after the ready line and measures the
# two others, whose partitions have a follower on a dead node (RSS, goroutines and per-replica
# figures are then of two nodes).
#
#   make build && scripts/idle-cost.sh 4 64 256
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/schemaless}
PORT=${PORT:-28070}
WAIT=${WAIT:-20}
WINDOW=${WINDOW:-30}
read -r -a dev_args <<<"${DEV_ARGS:-}"
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(4 64 256)
hz=$(getconf CLK_TCK)
printf '%-10s %-8s %-12s %-14s %-16s %-14s %-16s\n' partitions cores "cores/replica" "RSS MiB/node" "RSS KiB/replica" goroutines/node "goroutines/replica"
for n in "${counts[@]}"; do
  shards=$(( n > 64 ? n : 64 ))
  data=$(mktemp -d /tmp/schemaless-idle-XXXXXX)
  "$BIN" dev --data-dir "$data" --fresh --partitions "$n" --shards "$shards" --triggers=false --indexes=false \
    --schema=false --http-port "$PORT" --raft-port $((PORT + 100)) --admin-port $((PORT + 300)) "${dev_args[@]}" >"$data.log" 2>&1 &
  dev=$!
  for _ in $(seq 1 600); do
    grep -q '^ready: ' "$data.log" && break
    kill -0 "$dev" 2>/dev/null || { cat "$data.log" >&2; exit 1; }
    sleep 0.5
  done
  nodes=3
  victim=
  if [ "${PAUSE_ONE:-0}" = 1 ]; then
    victim=$(pgrep -f -- "serve .*$data/n3" || true)
    kill -STOP "$victim"
    nodes=2
  fi
  sleep "$WAIT"
  pids=$(pgrep -f -- "serve .*$data" | grep -vx "${victim:-none}" | tr '\n' ' ' || true)
  cpu() { local t=0; for p in $pids; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }
  a=$(cpu); sleep "$WINDOW"; b=$(cpu)
  rss=0; for p in $pids; do rss=$((rss + $(awk '/VmRSS/{print $2}' "/proc/$p/status"))); done
  gor=0; for i in $(seq 0 $((nodes - 1))); do
    g=$(curl -sf "http://127.0.0.1:$((PORT + 300 + i))/debug/pprof/goroutine?debug=1" | sed -nE '1s/.*total ([0-9]+).*/\1/p' || true)
    gor=$((gor + ${g:-0}))
  done
  [ -z "$victim" ] || kill -CONT "$victim"
  kill -INT "$dev"; wait "$dev" 2>/dev/null || true
  rm -rf "$data" "$data.log"
  awk -v n="$n" -v ticks=$((b - a)) -v hz="$hz" -v w="$WINDOW" -v rss="$rss" -v gor="$gor" -v k="$nodes" 'BEGIN {
    cores = ticks / hz / w
    printf "%-10d %-8.3f %-12.5f %-14.0f %-16.0f %-14.0f %-16.1f\n", n, cores, cores / (k * n), rss / k / 1024, rss / (k * n), gor / k, gor / (k * n)
  }'
done
