package jepsen

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/replication"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// WaitQuiet on real storage clusters (no node): quiet storage passes; a row left in a buffer
// table, or a master whose binary log keeps moving, holds it until its deadline, with an error
// naming what is not quiet; once that stops, it passes.
func TestWaitQuiet(t *testing.T) {
	mariadbtest.RequireServerBinary(t)
	ctx := context.Background()
	st, err := StartStorage(ctx, StorageConfig{Dir: t.TempDir(), FirstIP: "127.0.3.2",
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	require.NoError(t, err, "start the storage clusters")
	t.Cleanup(st.Close)
	c := &Cluster{}
	c.top.Store(&topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "quiet", MySQLPrefix: "jquiet"}}})
	// The meta tables (the buffer among them) on both masters, as a node's write store makes
	// them.
	for cl := range StorageClusters {
		ms, err := storage.OpenMySQL(ctx, storage.MySQLConfig{DSN: st.set.AdminDSN(cl, 0), Prefix: "jquiet"})
		require.NoError(t, err, "meta tables on c%d", cl)
		require.NoError(t, ms.Close())
	}
	db, err := replication.Open(st.set.AdminDSN(1, 0))
	require.NoError(t, err)
	defer db.Close()
	wait := func(d time.Duration) error {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return st.WaitQuiet(wctx, c, []string{"quiet"})
	}

	require.NoError(t, wait(20*time.Second), "quiet storage")

	_, err = db.ExecContext(ctx, "INSERT INTO jquiet_meta.buffer (datastore, `partition`, shard, row_key, column_name, ref_key, body, created_at, buffered_at) "+
		"VALUES ('quiet', 0, 0, UNHEX('00112233445566778899AABBCCDDEEFF'), 'C', 1, 'x', NOW(6), NOW(6))")
	require.NoError(t, err, "a buffered row")
	err = wait(2 * time.Second)
	require.Error(t, err, "a row in a buffer table")
	assert.Contains(t, err.Error(), "buffer tables on c1m0 hold 1 rows")
	_, err = db.ExecContext(ctx, "DELETE FROM jquiet_meta.buffer")
	require.NoError(t, err)

	// A writer that keeps landing: an insert into the master of c1 every 100 ms.
	_, err = db.ExecContext(ctx, "CREATE TABLE jquiet_meta.landing (id INT AUTO_INCREMENT PRIMARY KEY)")
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = db.ExecContext(ctx, "INSERT INTO jquiet_meta.landing () VALUES ()")
			}
		}
	}()
	err = wait(3 * time.Second)
	close(stop)
	wg.Wait()
	require.Error(t, err, "a master whose binary log keeps moving")
	assert.Contains(t, err.Error(), "binary logs still moved")
	require.NoError(t, wait(20*time.Second), "quiet again")
}
