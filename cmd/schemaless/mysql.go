package main

import (
	"context"
	"fmt"

	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// dropDevDatabases drops the MySQL databases of every node of top (prefix sl_<node>), so that
// `dev --fresh --mysql` starts empty.
func dropDevDatabases(ctx context.Context, dsn string, top *topology.Topology) error {
	var prefixes []string
	for _, n := range top.Nodes {
		prefixes = append(prefixes, "sl_"+sanitizePrefix(n.ID))
	}
	return dropDatabases(ctx, dsn, prefixes)
}

// dropDatabases drops the databases of the stores opened with each of prefixes (see
// storage.DropMySQLPrefix).
func dropDatabases(ctx context.Context, dsn string, prefixes []string) error {
	for _, p := range prefixes {
		if err := storage.DropMySQLPrefix(ctx, dsn, p); err != nil {
			return fmt.Errorf("--mysql: %w", err)
		}
	}
	return nil
}
