package fsm

import (
	"context"
	"math/rand"
	"testing"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

func openMySQL(t *testing.T) *storage.PartitionStore {
	t.Helper()
	st, err := storage.OpenMySQL(context.Background(), storage.MySQLConfig{DSN: mariadbtest.DSN(t), Prefix: mariadbtest.Prefix(t)})
	require.NoError(t, err, "OpenMySQL")
	t.Cleanup(func() { st.Close() })
	return openPartition(t, st)
}

// A MariaDB replica, a SQLite replica and a pebble replica fed the same log hold the same rows:
// the engines do not leak into outcomes, added_ids or created_at; and a snapshot taken on each
// restores into the next.
func TestDeterminismAcrossEngines(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLog(t, rng, 200)
	pm, ps, pp := openMySQL(t), openSQLite(t), openStore(t)
	rm := applyInBatches(t, newFSM(t, pm), logs, rng)
	rs := applyInBatches(t, newFSM(t, ps), logs, rng)
	rp := applyInBatches(t, newFSM(t, pp), logs, rng)
	require.Equal(t, rs, rm, "seed %d: MariaDB and SQLite replicas answered differently", seed)
	require.Equal(t, rp, rm, "seed %d: MariaDB and pebble replicas answered differently", seed)
	sameCells(t, dump(t, pm), dump(t, ps))
	sameCells(t, dump(t, pp), dump(t, pm))

	// A snapshot taken on MariaDB restores into SQLite, one of SQLite into pebble, one of pebble
	// into MariaDB.
	for _, c := range []struct {
		name     string
		src, dst *storage.PartitionStore
	}{{"MariaDB into SQLite", pm, openSQLite(t)}, {"SQLite into pebble", ps, openStore(t)}, {"pebble into MariaDB", pp, openMySQL(t)}} {
		snap, err := newFSM(t, c.src).Snapshot()
		require.NoError(t, err, "%s: Snapshot", c.name)
		var sink memSink
		require.NoError(t, snap.Persist(&sink), "%s: Persist", c.name)
		snap.Release()
		require.NoError(t, newFSM(t, c.dst).Restore(nopCloser{&sink}), "%s: Restore", c.name)
		sameCells(t, dump(t, c.dst), dump(t, c.src))
	}
}

type nopCloser struct{ *memSink }

func (nopCloser) Close() error { return nil }
