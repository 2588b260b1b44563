#!/usr/bin/env bash
# rss-breakdown.sh PID [METRICS_URL]: where a schemaless process's resident memory is, in MiB,
# from /proc/PID/smaps and /proc/PID/status (Linux):
#
#   rss                  VmRSS: what ps, top and process_resident_memory_bytes report
#   anonymous            RssAnon: memory only the process holds (Go's heap and stacks, SQLite's
#                        page caches and statements in modernc.org/libc's allocator)
#   file:raft.db         resident pages of raft-boltdb's log files, which bbolt maps whole and
#                        reads through the mapping: clean page cache, shared with the kernel,
#                        which takes them back under memory pressure
#   file:sqlite -shm     SQLite's WAL indexes (mapped)
#   file:binary, file:other
#
# With METRICS_URL (the node's /metrics) it splits the anonymous memory with the Go runtime's
# own figures: "go runtime" is every byte Go holds from the OS minus what it has returned
# (go_memstats_sys_bytes - go_memstats_heap_released_bytes, an upper bound of Go's resident
# share); "outside go" is the rest of the anonymous memory, which is SQLite's (modernc.org/libc
# allocates it with mmap, outside Go's heap).
set -euo pipefail
pid=${1:?usage: rss-breakdown.sh PID [METRICS_URL]}
url=${2:-}

mib() { awk -v k="$1" '{ printf "%-22s %8.1f MiB\n", k, $1 / 1024 }'; }

grep -E '^VmRSS:' "/proc/$pid/status" | awk '{print $2}' | mib rss
grep -E '^RssAnon:' "/proc/$pid/status" | awk '{print $2}' | mib anonymous
awk '
/^[0-9a-f]+-[0-9a-f]+ / { path = (NF >= 6) ? $6 : ""; next }
/^Rss:/ {
	if (path == "" || path ~ /^\[/) next
	if (path ~ /raft\.db$/) k = "file:raft.db"
	else if (path ~ /-shm$/) k = "file:sqlite -shm"
	else if (path ~ /(schemaless|\.test)$/) k = "file:binary"
	else k = "file:other"
	sum[k] += $2
}
END { for (k in sum) printf "%-22s %8.1f MiB\n", k, sum[k] / 1024 }' "/proc/$pid/smaps" | sort

if [ -n "$url" ]; then
	anon=$(grep -E '^RssAnon:' "/proc/$pid/status" | awk '{print $2 * 1024}')
	curl -fs "$url" | awk -v anon="$anon" '
	/^go_memstats_heap_inuse_bytes / { inuse = $2 }
	/^go_memstats_stack_inuse_bytes / { stack = $2 }
	/^go_memstats_sys_bytes / { sys = $2 }
	/^go_memstats_heap_released_bytes / { rel = $2 }
	END {
		printf "%-22s %8.1f MiB\n", "go heap in use", inuse / 1048576
		printf "%-22s %8.1f MiB\n", "go stacks", stack / 1048576
		printf "%-22s %8.1f MiB\n", "go runtime", (sys - rel) / 1048576
		printf "%-22s %8.1f MiB\n", "outside go", (anon - (sys - rel)) / 1048576
	}'
fi
