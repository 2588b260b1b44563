package mariadbtest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/schemaless-db/schemaless/internal/mariadb"
)

// sharedRepl is the replicated set every async-mode test of this process uses, started on
// first use: starting six servers takes several seconds, so tests share them and keep apart by
// database prefix.
var sharedRepl struct {
	mu  sync.Mutex
	set *mariadb.ReplicatedSet
	err error
}

// SharedReplicated returns this process's replicated set (2 clusters of a master and 2 minions,
// on 127.0.0.1), starting it on the first call (several seconds). It skips t when the server
// binaries are missing (fails it when CI=true) and fails t when the servers do not start.
// Main stops it. Tests that kill or promote members must start their own set instead
// (mariadb.StartReplicated).
func SharedReplicated(t testing.TB) *mariadb.ReplicatedSet {
	t.Helper()
	RequireServerBinary(t)
	sharedRepl.mu.Lock()
	defer sharedRepl.mu.Unlock()
	if sharedRepl.set == nil && sharedRepl.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedStartTimeout)
		sharedRepl.set, sharedRepl.err = mariadb.StartReplicated(ctx, mariadb.ReplicatedOptions{})
		cancel()
	}
	if sharedRepl.err != nil {
		t.Fatalf("mariadbtest: start the shared replicated set: %v", sharedRepl.err)
	}
	return sharedRepl.set
}

// ReplicatedPrefix returns a database prefix unique to t (as Prefix) for a datastore on set.
// When t ends, its databases are dropped on every cluster's current master (the drops
// replicate to the minions), failing t if that fails.
func ReplicatedPrefix(t testing.TB, set *mariadb.ReplicatedSet) string {
	t.Helper()
	prefix := randomPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		for c := range set.Clusters {
			if err := set.DropPrefix(ctx, c, prefix); err != nil {
				t.Errorf("mariadbtest: drop databases of prefix %s on cluster %d: %v", prefix, c, err)
			}
		}
	})
	return prefix
}

// stopSharedReplicated stops the shared replicated set, if one was started.
func stopSharedReplicated() error {
	sharedRepl.mu.Lock()
	defer sharedRepl.mu.Unlock()
	if sharedRepl.set == nil {
		return nil
	}
	err := sharedRepl.set.Close()
	sharedRepl.set = nil
	if err != nil {
		return fmt.Errorf("stop the shared replicated set: %w", err)
	}
	return nil
}
