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

// A MariaDB replica and a SQLite replica fed the same log hold the same rows: the engines
// do not leak into outcomes, added_ids or created_at.
func TestDeterminismAcrossEngines(t *testing.T) {
	t.Parallel()
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLog(t, rng, 200)
	pm, ps := openMySQL(t), openSQLite(t)
	rm := applyInBatches(t, newFSM(t, pm), logs, rng)
	rs := applyInBatches(t, newFSM(t, ps), logs, rng)
	require.Equal(t, rs, rm, "seed %d: MariaDB and SQLite replicas answered differently", seed)
	sameCells(t, dump(t, pm), dump(t, ps))

	// A snapshot taken on MariaDB restores into SQLite.
	f := newFSM(t, pm)
	snap, err := f.Snapshot()
	require.NoError(t, err, "Snapshot on MariaDB")
	var sink memSink
	require.NoError(t, snap.Persist(&sink), "Persist on MariaDB")
	snap.Release()
	dst := openSQLite(t)
	require.NoError(t, newFSM(t, dst).Restore(nopCloser{&sink}), "Restore into SQLite")
	sameCells(t, dump(t, dst), dump(t, pm))
}

type nopCloser struct{ *memSink }

func (nopCloser) Close() error { return nil }
