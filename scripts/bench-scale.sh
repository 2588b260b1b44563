#!/usr/bin/env bash
# bench-scale.sh runs the scale sweeps of 'schemaless bench' and draws their plots:
#
#   clients     put and put-batch on $TARGETS at each of $PUT_CLIENTS / $BATCH_CLIENTS clients:
#               $OUT_DIR/bench-clients-put.svg (cells/s) and bench-clients-put-p99.svg (p99 ms)
#   partitions  put with $PARTITION_CLIENTS clients on $TARGETS, one bench run per value of
#               $PARTITIONS (--partitions N, results in partitions-p<N>.jsonl):
#               $OUT_DIR/bench-partitions.svg (cells/s)
#   cells       scale-cells on $SCALE_TARGETS up to each of $SCALE_STEPS stored cells, at
#               $SCALE_RATE requests/s of put_cell and of get_cell_latest:
#               $OUT_DIR/bench-cells-latency.svg (p50 and p99 ms of put and get) and
#               bench-cells-load.svg (load cells/s)
#
# Results (bench --json lines) go to $DATA_DIR, with commands.txt listing every command run;
# each command is also printed on stderr before it runs. Run from anywhere; paths are relative
# to the repository root. The in-process targets share this machine's cores with the clients:
# write the machine and the commands down with the figures (BENCHMARKS.md).
#
# Environment (defaults in brackets):
#   SWEEPS             sweeps to run, space- or comma-separated [clients partitions cells]
#   BIN                the schemaless binary [bin/schemaless], built first by 'make build'
#                      unless SKIP_BUILD=1
#   DURATION, WARMUP   measured and unmeasured time of each run [10s, 2s]
#   TARGETS            targets of the clients and partitions sweeps [sqlite,raft-noop]
#   PUT_CLIENTS        clients of put [1,4,16,64,128,256]
#   BATCH_CLIENTS      clients of put-batch (--batch 100 cells per request) [1,4,16,64]
#   PARTITIONS         partition counts [1 2 4 8 16]
#   PARTITION_CLIENTS  clients of the partitions sweep [64]
#   SCALE_TARGETS      targets of the cells sweep [sqlite] (raft-noop stores nothing to read)
#   SCALE_STEPS        cumulative stored cells [100000,300000,1000000,3000000]
#   SCALE_RATE         requests/s of put_cell and of get_cell_latest [200]
#   SCALE_CLIENTS      requests of each kind in flight at most [64]
#   SCALE_FILE         flights loaded [bench's default: ../shared/datasets/flights-3m.csv.gz
#                      if it exists, else testdata/flights-100k.csv.gz]
#   DATA_DIR           results [.data/bench-scale]
#   OUT_DIR            plots [docs]
#
# A smoke run of about a minute, leaving docs/ alone:
#   OUT_DIR=$(mktemp -d) DATA_DIR=$(mktemp -d) DURATION=2s WARMUP=500ms PUT_CLIENTS=1,8 \
#     BATCH_CLIENTS=1,8 PARTITIONS="1 2" PARTITION_CLIENTS=8 SCALE_STEPS=2000,5000 \
#     SCALE_RATE=50 SCALE_CLIENTS=8 scripts/bench-scale.sh
set -euo pipefail

cd "$(dirname "$0")/.."

SWEEPS=${SWEEPS:-clients partitions cells}
BIN=${BIN:-bin/schemaless}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
TARGETS=${TARGETS:-sqlite,raft-noop}
PUT_CLIENTS=${PUT_CLIENTS:-1,4,16,64,128,256}
BATCH_CLIENTS=${BATCH_CLIENTS:-1,4,16,64}
PARTITIONS=${PARTITIONS:-1 2 4 8 16}
PARTITION_CLIENTS=${PARTITION_CLIENTS:-64}
SCALE_TARGETS=${SCALE_TARGETS:-sqlite}
SCALE_STEPS=${SCALE_STEPS:-100000,300000,1000000,3000000}
SCALE_RATE=${SCALE_RATE:-200}
SCALE_CLIENTS=${SCALE_CLIENTS:-64}
SCALE_FILE=${SCALE_FILE:-}
DATA_DIR=${DATA_DIR:-.data/bench-scale}
OUT_DIR=${OUT_DIR:-docs}

SWEEPS=${SWEEPS//,/ }
PARTITIONS=${PARTITIONS//,/ }
for sweep in $SWEEPS; do
	case $sweep in
	clients | partitions | cells) ;;
	*)
		echo "bench-scale.sh: SWEEPS: unknown sweep $sweep: want clients, partitions or cells" >&2
		exit 1
		;;
	esac
done
mkdir -p "$DATA_DIR" "$OUT_DIR"
COMMANDS=$DATA_DIR/commands.txt
{
	echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm), $(nproc) CPUs"
	echo "# $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')"
} >"$COMMANDS"

# show prints its arguments as one command line, single-quoting those that need it.
show() {
	local out="" a
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./=:@%+,-]+$ ]]; then
			out+="$a "
		else
			out+="'${a//\'/\'\\\'\'}' "
		fi
	done
	printf '%s' "${out% }"
}

# run prints the command on stderr and in $COMMANDS, then runs it.
run() {
	local line
	line=$(show "$@")
	echo "+ $line" >&2
	echo "$line" >>"$COMMANDS"
	"$@"
}

# run_to FILE CMD...: run with stdout to FILE.
run_to() {
	local file=$1 line
	shift
	line="$(show "$@") > $(show "$file")"
	echo "+ $line" >&2
	echo "$line" >>"$COMMANDS"
	"$@" >"$file"
}

# plot runs 'bench plot' with its arguments.
plot() { run "$BIN" bench plot "$@"; }

if [[ ${SKIP_BUILD:-0} != 1 ]]; then
	run make build
fi
if [[ ! -x $BIN ]]; then
	echo "bench-scale.sh: $BIN is not an executable: run 'make build' or set BIN" >&2
	exit 1
fi

common=(--duration "$DURATION" --warmup "$WARMUP" --json)

for sweep in $SWEEPS; do
	case $sweep in
	clients)
		run_to "$DATA_DIR/clients-put.jsonl" "$BIN" bench --target "$TARGETS" --workload put --clients "$PUT_CLIENTS" "${common[@]}"
		run_to "$DATA_DIR/clients-put-batch.jsonl" "$BIN" bench --target "$TARGETS" --workload put-batch --clients "$BATCH_CLIENTS" "${common[@]}"
		in="$DATA_DIR/clients-put.jsonl,$DATA_DIR/clients-put-batch.jsonl"
		plot --in "$in" --x clients --y cells_per_sec --log-x \
			--title "put (1 cell) and put-batch (100 cells): throughput vs clients, $DURATION each" \
			--out "$OUT_DIR/bench-clients-put.svg"
		plot --in "$in" --x clients --y p99 --log-x --log-y \
			--title "put (1 cell) and put-batch (100 cells): p99 latency vs clients, $DURATION each" \
			--out "$OUT_DIR/bench-clients-put-p99.svg"
		;;
	partitions)
		files=()
		for p in $PARTITIONS; do
			f="$DATA_DIR/partitions-p$p.jsonl" # bench plot --x partitions reads p<N> from the name
			run_to "$f" "$BIN" bench --target "$TARGETS" --workload put --clients "$PARTITION_CLIENTS" --partitions "$p" "${common[@]}"
			files+=("$f")
		done
		in=$(IFS=,; echo "${files[*]}")
		plot --in "$in" --x partitions --y cells_per_sec --log-x \
			--title "put with $PARTITION_CLIENTS clients: throughput vs partitions (64 shards, 3 nodes), $DURATION each" \
			--out "$OUT_DIR/bench-partitions.svg"
		;;
	cells)
		scale=(--scale-steps "$SCALE_STEPS" --scale-rate "$SCALE_RATE")
		if [[ -n $SCALE_FILE ]]; then
			scale+=(--scale-file "$SCALE_FILE")
		fi
		run_to "$DATA_DIR/cells.jsonl" "$BIN" bench --target "$SCALE_TARGETS" --workload scale-cells --clients "$SCALE_CLIENTS" "${scale[@]}" "${common[@]}"
		plot --in "$DATA_DIR/cells.jsonl" --x stored_cells --y p50,p99 --log-x \
			--workload "scale-cells put,scale-cells get" \
			--title "put_cell and get_cell_latest (stale) at $SCALE_RATE requests/s each: latency vs cells stored" \
			--out "$OUT_DIR/bench-cells-latency.svg"
		plot --in "$DATA_DIR/cells.jsonl" --x stored_cells --y cells_per_sec --log-x \
			--workload "scale-cells load" \
			--title "load (put_cells of 500, 8 in flight): throughput vs cells stored at the end of the step" \
			--out "$OUT_DIR/bench-cells-load.svg"
		;;
	esac
done

echo "results in $DATA_DIR (commands in $COMMANDS), plots in $OUT_DIR:" >&2
ls -1 "$OUT_DIR"/bench-*.svg >&2
