package mariadbtest

import (
	"context"

	"github.com/schemaless-db/schemaless/internal/mariadb"
)

// ReplicatedSet is the launcher's set of replicating storage clusters (mariadb.ReplicatedSet),
// as SharedReplicated and StartReplicated return it.
type ReplicatedSet = mariadb.ReplicatedSet

// ReplicatedOptions configures StartReplicated (mariadb.ReplicatedOptions).
type ReplicatedOptions = mariadb.ReplicatedOptions

// StartReplicated starts a replicated set of the test's own (mariadb.StartReplicated), for
// tests that kill, restart or promote members and so cannot use SharedReplicated. It blocks for
// several seconds; the caller must Close the set.
func StartReplicated(ctx context.Context, opts ReplicatedOptions) (*ReplicatedSet, error) {
	return mariadb.StartReplicated(ctx, opts)
}
