package fsm

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/storage"
)

// cpuTime is the process's user+system CPU time so far, in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkApplyWrites applies batches of 64 one-cell writes of new rows, the shape group
// commit gives a busy partition, on SQLite and on pebble: plain (no ID: nothing recorded), with an ID each
// (a time-ordered UUIDv7, as nodes and the Go client make: the outcome recorded in the requests table), and conditional (decided in log order, one
// latest-ref-key lookup per write). One op is one cell; cpu-ns/op is the process's user+system CPU per cell.
func BenchmarkApplyWrites(b *testing.B) {
	engines := []struct {
		name string
		open func(dir string) (*storage.Store, error)
	}{
		{"sqlite", func(dir string) (*storage.Store, error) {
			return storage.OpenSQLite(b.Context(), storage.SQLiteConfig{Dir: dir})
		}},
		{"pebble", func(dir string) (*storage.Store, error) {
			return storage.OpenPebble(b.Context(), storage.PebbleConfig{Dir: dir})
		}},
	}
	for _, e := range engines {
		for _, mode := range []string{"plain", "id", "conditional"} {
			b.Run(e.name+"/"+mode, func(b *testing.B) { benchApplyWrites(b, e.open, mode) })
		}
	}
}

func benchApplyWrites(b *testing.B, open func(dir string) (*storage.Store, error), mode string) {
	{
		{
			store, err := open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { store.Close() })
			st, err := store.Partition(b.Context(), storage.PartitionID{Datastore: "trips", Partition: 2}, testShards)
			if err != nil {
				b.Fatal(err)
			}
			f, err := New(b.Context(), Config{Store: st, StoreBackoff: time.Millisecond})
			if err != nil {
				b.Fatal(err)
			}
			bd := body(b, `{"origin":"SFO","destination":"JFK","distance":2586,"delay":12}`)
			const perBatch = 64
			at := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
			b.ResetTimer()
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
			for i, idx := 0, uint64(1); i < b.N; idx++ {
				ws := make([]command.Write, 0, perBatch)
				for j := 0; j < perBatch && i < b.N; j, i = j+1, i+1 {
					row := uuid.New()
					shard := testShards.First + i%testShards.Len()
					w := command.Write{Cells: []command.Cell{{Shard: shard, Key: cellKeyOf(row), Body: bd}}}
					switch mode {
					case "id":
						w.ID = uuid.Must(uuid.NewV7())
					case "conditional":
						w.ID = uuid.Must(uuid.NewV7())
						w.Conditions = []command.Condition{{Shard: shard, RowKey: row, ColumnKey: "BASE", None: true}}
					}
					ws = append(ws, w)
				}
				data, err := command.Encode(&command.Append{CreatedAt: at.Add(time.Duration(idx) * time.Millisecond), Writes: ws})
				if err != nil {
					b.Fatal(err)
				}
				out := f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}})
				if r := out[0].(*Response); r.Err != nil || len(r.writes()) != len(ws) {
					b.Fatal(fmt.Sprint("apply: ", r.Err))
				}
			}
		}
	}
}

func cellKeyOf(row uuid.UUID) cells.Key { return cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 1} }
