package cluster_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/topology"
)

// strayShardTables returns, for each SQLite file of datastore ds in dir (a node's data
// directory), the shard tables (entity_NNNN, index_<name>_NNNN) whose shard is outside the
// range of the file's partition in d: what a split leaves in each half, which the half drops
// after the split.
func strayShardTables(dir string, d *topology.DatastoreSpec) ([]string, error) {
	var out []string
	for _, p := range d.Partitions {
		path := filepath.Join(dir, "sqlite", ds+"-p"+strconv.Itoa(p.ID)+".db")
		if _, err := os.Stat(path); err != nil {
			continue // not a replica here
		}
		names, err := sqliteTables(path)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if !strings.HasPrefix(name, "entity_") && !strings.HasPrefix(name, "index_") {
				continue
			}
			if s, err := strconv.Atoi(name[len(name)-4:]); err == nil && (s < p.FirstShard || s > p.LastShard) {
				out = append(out, filepath.Base(path)+":"+name)
			}
		}
	}
	return out, nil
}

// sqliteTables lists the tables of the SQLite file at path, opened read-only beside its node.
func sqliteTables(path string) (names []string, err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	rows, err := db.QueryContext(context.Background(), "SELECT name FROM sqlite_schema WHERE type = 'table'")
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, rows.Err()
}

// requireNoStrayTables waits until no node's SQLite file of ds holds a table of a shard
// outside its partition's range: each half of a split has dropped the other's tables.
func requireNoStrayTables(t *testing.T, c *clustertest.Cluster) {
	t.Helper()
	for i := range c.Len() {
		n := c.Node(i)
		if n == nil {
			continue
		}
		d, err := n.Datastore(ds)
		require.NoError(t, err)
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			left, err := strayShardTables(c.DataDir(i), d)
			if assert.NoError(ct, err) {
				assert.Empty(ct, left, "node %d: stray tables left after the splits", i)
			}
		}, opTimeout, 50*time.Millisecond, "node %d drops its stray tables", i)
	}
}
