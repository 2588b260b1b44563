#!/usr/bin/env bash
# bench-merge.sh measures merges on node processes as users deploy them: a fresh `schemaless dev
# --partitions 1` cluster (pebble), 100,000 cells preloaded and the partition split at its
# middle (`bench --workload split`), then, under 64 put_cell writers (`bench --workload put`, a
# process of its own, 25 s), four rounds of a merge of the two halves (POST
# /v1/admin/partitions/trips/merge: each answer's took_ms and pause_ms printed) and a split at
# the middle again. Needs bin/schemaless (make build), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=27870
data=$(mktemp -d /tmp/schemaless-merge-XXXXXX)
bin/schemaless dev --data-dir "$data" --fresh --partitions 1 --triggers=false --indexes=false --schema=false --http-port $PORT --raft-port $((PORT+100)) --admin-port $((PORT+300)) > "$data.dev.log" 2>&1 &
dev=$!
trap 'kill -INT $dev; wait $dev; rm -rf "$data" "$data".*.log' EXIT
for _ in $(seq 1 120); do grep -q '^ready: ' "$data.dev.log" && break; sleep 0.5; done
ep="http://127.0.0.1:$PORT,http://127.0.0.1:$((PORT+1)),http://127.0.0.1:$((PORT+2))"
# Preload 100,000 cells and split at the middle (bench split workload, 1 split).
bin/schemaless bench --target external --endpoints "$ep" --workload split --clients 64 --split-count 1 --split-preload 100000 --duration 5s --baseline '' 2>&1 | tail -8
curl -s http://127.0.0.1:$PORT/v1/admin/datastores | python3 -c 'import json,sys; d=json.load(sys.stdin); print([(p["id"],p["first_shard"],p["last_shard"]) for p in d["datastores"][0]["partitions"]])'
# Writers for 25 s; merges and splits back and forth meanwhile.
bin/schemaless bench --target external --endpoints "$ep" --workload put --clients 64 --duration 25s --warmup 1s --baseline '' > "$data.put.log" 2>&1 &
bp=$!
sleep 4
for i in 1 2 3 4; do
  parts=$(curl -s http://127.0.0.1:$PORT/v1/admin/datastores | python3 -c 'import json,sys; d=json.load(sys.stdin); ps=sorted(d["datastores"][0]["partitions"], key=lambda p:p["first_shard"]); print(" ".join(str(p["id"]) for p in ps))')
  set -- $parts
  if [ $# -ge 2 ]; then
    curl -s -X POST -d "{\"left\":$1,\"right\":$2}" http://127.0.0.1:$PORT/v1/admin/partitions/trips/merge; echo
  fi
  sleep 2
  curl -s -X POST -d '{}' http://127.0.0.1:$PORT/v1/admin/partitions/trips/$1/split | python3 -c 'import json,sys; d=json.load(sys.stdin); print("split", d.get("took_ms"), d.get("right",{}).get("id"), d.get("error"))'
  sleep 2
done
wait $bp
tail -6 "$data.put.log"
