package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
)

// The mixed cluster of `dev --mode mixed`: trips in raft mode and rides in async mode on the
// MariaDB servers of devasync.go, served by the same nodes.
const (
	// devModeMixed is the --mode of a mixed cluster. It is no topology mode: each datastore
	// has its own.
	devModeMixed = "mixed"
	// devMixedAsync is the async datastore beside trips.
	devMixedAsync = "rides"
	// devMixedFlights is how many flights of --import also go into rides (fewer with a lower
	// --limit): enough to show its writes and reads, few enough to take a second or two.
	devMixedFlights = 1000
	// devMixedStaleWait bounds the retries of rides' stale read-back: its minions trail the
	// masters by the replication lag, longer than the strong read-back of a few flights takes.
	devMixedStaleWait = 10 * time.Second
)

// printMixedReady prints the ready line of a mixed cluster, naming both datastores. store is
// the nodes' store, which holds trips.
func printMixedReady(f devFlags, took time.Duration, store string, endpoints []string) {
	fmt.Printf("ready: %d nodes in %.1fs, store %s and mariadb, datastore trips (raft, %d shards, %d partitions), "+
		"datastore %s (async, %d shards, %d partitions on %d storage clusters), http %v, data %s\n",
		f.nodes, took.Seconds(), store, f.shards, f.partitions, devMixedAsync, f.shards, f.partitions, devAsyncClusters, endpoints, f.dataDir)
}

// devRidesDemo imports the first devMixedFlights flights of --import (fewer with a lower
// --limit) into rides and reads them back, strong and stale (the stale read-back tried again
// for up to devMixedStaleWait while the minions trail), printing a blank line and then each
// line after "rides: ": the async datastore's writes and reads beside trips'.
func devRidesDemo(ctx context.Context, endpoints []string, f devFlags) error {
	cl, err := client.New(f.clientConfig(endpoints, devMixedAsync))
	if err != nil {
		return err
	}
	opts := f.importOpts
	opts.quiet = true
	if opts.limit <= 0 || opts.limit > devMixedFlights {
		opts.limit = devMixedFlights
	}
	fmt.Println()
	st, err := importFlights(ctx, cl, f.importPath, f.airports, opts)
	if err != nil {
		return fmt.Errorf("%s: import: %w", devMixedAsync, err)
	}
	st.Print(os.Stdout, devMixedAsync+": ")
	return examples.ReadBack(ctx, cl, f.importPath, f.airports, opts.limit, devMixedStaleWait, os.Stdout, devMixedAsync+": ")
}

// printMixedCurls prints, after printCurls, how to look at rides and, when c0 has a master,
// how to try an async outage beside trips.
func printMixedCurls(ep string, storage *devStorage) {
	row := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	fmt.Printf(`  curl -s -X PUT %[1]s/v1/%[3]s/cells/%[2]s/BASE/1 -d '{"origin":"SFO","destination":"JFK","distance":2586}'   # async: 201, or 202 buffered
  curl -s '%[1]s/v1/%[3]s/cells/%[2]s/BASE?consistency=stale'   # from a minion
  curl -s '%[1]s/readyz?datastore=%[3]s'         # 503 while a storage cluster of %[3]s has no master
  curl -s %[1]s/readyz                           # the node and each datastore
`, ep, row, devMixedAsync)
	if pid := storage.masterPidFile(0); pid != "" {
		fmt.Printf("  kill -9 $(cat %s)   # c0's master: %s unready, trips and /readyz still ready\n", pid, devMixedAsync)
	}
}
