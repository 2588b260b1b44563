package fsm

import (
	"context"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/internal/mariadbtest"
	"github.com/schemaless-db/schemaless/storage"
)

func TestMain(m *testing.M) { mariadbtest.Main(m) }

func openMySQL(t *testing.T) *storage.PartitionStore {
	t.Helper()
	st, err := storage.OpenMySQL(context.Background(), storage.MySQLConfig{DSN: mariadbtest.DSN(t), Prefix: mariadbtest.Prefix(t)})
	if err != nil {
		t.Fatalf("OpenMySQL: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return openPartition(t, st)
}

// A MariaDB replica and a SQLite replica fed the same log hold the same rows: the engines
// do not leak into outcomes, added_ids or created_at.
func TestDeterminismAcrossEngines(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	logs := randomLog(t, rng, 200)
	pm, ps := openMySQL(t), openSQLite(t)
	rm := applyInBatches(t, newFSM(t, pm), logs, rng)
	rs := applyInBatches(t, newFSM(t, ps), logs, rng)
	if !reflect.DeepEqual(rm, rs) {
		t.Fatalf("seed %d: MariaDB and SQLite replicas answered differently", seed)
	}
	sameCells(t, dump(t, pm), dump(t, ps))

	// A snapshot taken on MariaDB restores into SQLite.
	f := newFSM(t, pm)
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	dst := openSQLite(t)
	if err := newFSM(t, dst).Restore(nopCloser{&sink}); err != nil {
		t.Fatal(err)
	}
	sameCells(t, dump(t, dst), dump(t, pm))
}

type nopCloser struct{ *memSink }

func (nopCloser) Close() error { return nil }
