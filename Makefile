# The two commands a newcomer needs: `make run` (the main job) and `make test`.
GO      ?= go
BIN     := bin/schemaless
DATA    ?= .data/dev
SAMPLE  := testdata/flights-100k.csv.gz

MYSQL_DSN ?= root@tcp(127.0.0.1:3306)/
JEPSEN_ARGS ?=

.PHONY: all build run test test-short vet grow bench bench-scale jepsen jepsen-short jepsen-raft-695 jepsen-async jepsen-membership clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/schemaless

# A local 3-node raft cluster on embedded pebble stores (a $(DATA) holding SQLite data from an
# earlier run is migrated into them); imports the 100,000-flight sample through the HTTP API,
# reads every cell back, prints example curls and serves until Ctrl-C. Re-running it keeps the
# data (every import answers "exists"); `make run FRESH=1` starts empty.
run: build
	./$(BIN) dev --data-dir $(DATA) --import $(SAMPLE) $(if $(FRESH),--fresh,)

# Every test with the race detector, the MariaDB suites included (they start a throwaway
# MariaDB when none answers at 127.0.0.1:3306, and are mandatory when CI=true); the jepsen
# package last and alone: its end-to-end tests run real node processes, which would otherwise
# share the 2 cores with the in-process clusters of the cluster package and starve both of the
# CPU their raft timeouts assume; then each fuzz
# target for 15 s (go test -fuzz takes one package and one target at a time; their seed corpora
# already ran as tests). The first fuzz build of ./api instruments its dependencies and takes
# minutes; the build cache keeps it.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 45m $$($(GO) list ./... | grep -v '/jepsen$$')
	$(GO) test -race -count=1 -timeout 30m ./jepsen/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime 15s ./api
	$(GO) test -run '^$$' -fuzz '^FuzzBodyRoundTrip$$' -fuzztime 15s ./cells
	$(GO) test -run '^$$' -fuzz '^FuzzBodyDecode$$' -fuzztime 15s ./cells

test-short:
	$(GO) test -short -count=1 ./...

# The fault-injection harness, the long run (needs root and iptables; mariadbd for async mode):
# 10 minutes with every workload (cells, durability, triggers, index, cas, bank) and the nemeses
# of `--nemesis all` (node kills and pauses, partitions, trigger worker kills and pauses) and the
# split nemesis (partitions split and merge online) on pebble, then 10 on SQLite, then 10 on the
# MariaDB at $(MYSQL_DSN); then, with --secure (see jepsen-short; the MariaDB servers of async
# mode stay plaintext), 30 s of membership changes on 5 nodes, where a replica has somewhere to
# move (about 35 s), and 30 s of async mode (cells, durability, cas and bank on 2 MariaDB storage
# clusters, every async nemesis and the split nemesis, splitting in place on the masters; about
# 50 s); then 10 minutes of replication between two clusters (east, the run's, and west beside
# it) with kills of either's nodes, partitions inside east and 30 s cuts between the two. Each
# run leaves a report under .data/jepsen/.
JEPSEN_WORKLOADS := --workload cells,durability,triggers,index,cas,bank
JEPSEN_MEMBERSHIP_SHORT := --duration 30s --quiet 6s --interval 2s --fault-duration 3s --nodes 5 --workers-per-node 1 \
	--workload cells,durability --nemesis membership
JEPSEN_REPLICATION := --duration 10m --workload replication \
	--nemesis kill-random,kill-leader,partition-one,partition-leader,kill-worker,pause-worker
JEPSEN_ASYNC_SHORT := --mode async --duration 30s --quiet 8s --interval 2s --nemesis all,split --workload cells,durability,cas,bank
jepsen: build
	./$(BIN) jepsen --duration 10m --store pebble --nemesis all,split $(JEPSEN_WORKLOADS) $(JEPSEN_ARGS)
	./$(BIN) jepsen --duration 10m --store sqlite --nemesis all,split $(JEPSEN_WORKLOADS) $(JEPSEN_ARGS)
	./$(BIN) jepsen --duration 10m --store mysql --mysql '$(MYSQL_DSN)' --nemesis all,split $(JEPSEN_WORKLOADS) $(JEPSEN_ARGS)
	./$(BIN) jepsen --secure $(JEPSEN_MEMBERSHIP_SHORT)
	./$(BIN) jepsen --secure $(JEPSEN_ASYNC_SHORT)
	./$(BIN) jepsen $(JEPSEN_REPLICATION) $(JEPSEN_ARGS)

# hashicorp/raft issue 695 shown and worked around: the same partition-heavy schedule with raft's
# heartbeat fast path (expected to find acknowledged cells stored under another added_id, so its
# failure is ignored), then with heartbeats in raft's main loop, the default (must be valid).
RAFT695 := --duration 10m --seed 695 --interval 2s --fault-duration 3s --workload cells,durability \
	--nemesis partition-one,partition-leader,partition-halves,partition-ring,partition-bridge,pause-leader
jepsen-raft-695: build
	-./$(BIN) jepsen $(RAFT695) --serve-arg=--heartbeat-timeout,500ms,--election-timeout,500ms,--leader-lease-timeout,250ms,--request-timeout,2s,--raft-heartbeat-fast-path
	./$(BIN) jepsen $(RAFT695)

# The short run CI does, about 2 minutes: 2 minutes on 3 nodes, pebble, every workload and the
# nemeses of `--nemesis all` and split (instant: the same duration), with --secure (TLS on the
# API and mutual TLS between nodes, bearer tokens, encrypted gossip, from a bundle in the run's
# certs/; every harness client uses https and the admin token). The membership nemesis on 5
# nodes and async mode run in `make jepsen`.
jepsen-short: build
	./$(BIN) jepsen --secure --duration 2m --nemesis all,split $(JEPSEN_WORKLOADS) $(JEPSEN_ARGS)

# Async mode (needs root, iptables and mariadbd): the harness starts 2 MariaDB storage clusters
# of a master and 2 minions and runs cells, durability, cas and bank on async datastores for 3 minutes under
# every async nemesis and the split nemesis. Then the unsafe demonstration: the lossy failover (a master cut from its
# minions, killed while cut off, a minion promoted) without buffered writes, expected to lose
# acknowledged writes (its failure is ignored), and the same seed with buffered writes (must be
# valid).
ASYNCDEMO := --mode async --duration 1m --quiet 10s --seed 5 --interval 2s --fault-duration 6s --nemesis partition-failover
jepsen-async: build
	./$(BIN) jepsen --mode async --duration 3m --nemesis all,split --workload cells,durability,cas,bank $(JEPSEN_ARGS)
	-./$(BIN) jepsen $(ASYNCDEMO) --unsafe-no-buffered-writes
	./$(BIN) jepsen $(ASYNCDEMO)

# Raft membership changes under faults: 3 minutes on 5 nodes (3 replicas per partition, so a
# replica has somewhere to move), cells and durability, voters removed and added back, replicas
# moved, leaderships transferred, together with node kills and network partitions.
JEPSEN_MEMBERSHIP := --duration 3m --nodes 5 --workload cells,durability \
	--nemesis membership,kill-random,kill-leader,partition-one,partition-leader,partition-halves,partition-ring,partition-bridge
jepsen-membership: build
	./$(BIN) jepsen $(JEPSEN_MEMBERSHIP) $(JEPSEN_ARGS)

# Growth without downtime, shown: 3 nodes holding 6 partitions under write load, 3 nodes join
# through gossip, a rebalance moves 9 replicas onto them (add, catch up, promote, remove), one
# node is drained and leaves; then a rolling restart of every node under load. Prints the
# figures (writes/s before, during and after, moves, failed writes: must be 0).
GROW_PHASE ?= 20s
grow:
	GROW_PHASE=$(GROW_PHASE) $(GO) test -count=1 -v -run 'TestGrowOnline|TestRollingRestart' ./cluster | grep -E 'figures|^(---|ok|FAIL|PASS)'

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The scale sweeps of BENCHMARKS.md (throughput vs clients and partitions, latency vs cells
# stored, up to 3 million flights) and their plots in docs/; about 20 minutes. Environment
# variables of scripts/bench-scale.sh shorten it (DURATION=2s, SCALE_STEPS=...).
bench-scale: build
	SKIP_BUILD=1 scripts/bench-scale.sh

clean:
	rm -rf bin .data
