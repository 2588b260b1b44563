package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
)

const itIndexDef = `
table: flights_by_origin
shard_field: origin
column_defs:
  - column_key: BASE
    fields:
      - { field: origin, type: string }
      - { field: delay, type: int }
      - { field: date, type: datetime }
`

// itFlight is a BASE cell written by the index test.
type itFlight struct {
	row    uuid.UUID
	origin string
	delay  int
	date   string
}

// itWaitIndex polls Index until version of name is ready with entries entries and no lag.
func itWaitIndex(t *testing.T, ctx context.Context, cl *client.Client, name string, version int, entries int64) wire.IndexVersionStatus {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	var last wire.IndexVersionStatus
	for time.Now().Before(deadline) {
		st, err := cl.Index(ctx, name)
		if err != nil {
			t.Fatalf("Index(%s): got %v, want nil", name, err)
		}
		for _, v := range st.Versions {
			if v.Version == version {
				last = v
			}
		}
		if last.State == wire.IndexReady && last.LagCells == 0 && last.Entries == entries {
			return last
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("index %s version %d: got %+v after 90s, want ready with %d entries and no lag", name, version, last, entries)
	return last
}

func TestIntegrationIndexes(t *testing.T) {
	// Sessions of 10s: a maintainer whose heartbeat is slow on a loaded machine keeps its shards.
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
	cl := itClient(t, c.URLs(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	origins := []string{"LAX", "SFO", "JFK"}
	var flights []itFlight
	var writes []client.CellWrite
	for i := 0; i < 45; i++ {
		f := itFlight{row: itRow(t, i), origin: origins[i%3], delay: (i * 37) % 90, date: fmt.Sprintf("2001-01-%02dT10:00:00Z", 1+i%5)}
		flights = append(flights, f)
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: f.row, ColumnKey: "BASE", RefKey: 1},
			Body: json.RawMessage(fmt.Sprintf(`{"origin":%q,"delay":%d,"date":%q,"distance":%d}`, f.origin, f.delay, f.date, 100+i))})
	}
	if _, err := cl.PutCells(ctx, writes); err != nil {
		t.Fatalf("PutCells: got %v, want nil", err)
	}

	// Define, then define again: the same version.
	res, err := cl.DefineIndex(ctx, []byte(itIndexDef))
	if err != nil || res != (wire.IndexDefineResult{Index: "flights_by_origin", Version: 1, State: wire.IndexBuilding, Created: true}) {
		t.Fatalf("DefineIndex: got %+v, %v, want version 1 created and building", res, err)
	}
	res, err = cl.DefineIndex(ctx, []byte(itIndexDef))
	if err != nil || res.Version != 1 || res.Created {
		t.Fatalf("DefineIndex again: got %+v, %v, want version 1, not created", res, err)
	}
	v1 := itWaitIndex(t, ctx, cl, "flights_by_origin", 1, int64(len(flights)))
	if len(v1.Shards) != 16 || v1.Progress != 1 || v1.Definition.ShardField != "origin" {
		t.Errorf("Index version 1: got %+v, want 16 shards, progress 1, shard field origin", v1)
	}
	list, err := cl.Indexes(ctx, client.WithConsistency(client.ConsistencyStale))
	if err != nil || len(list.Indexes) != 1 || list.Indexes[0].Alias != 1 || list.Indexes[0].Versions[0].Shards != nil {
		t.Fatalf("Indexes: got %+v, %v, want flights_by_origin with alias 1 and no per-shard offsets", list, err)
	}

	// Every page of LAX flights with delay >= 20, latest delays first, checked against the
	// flights written.
	var want []itFlight
	for _, f := range flights {
		if f.origin == "LAX" && f.delay >= 20 {
			want = append(want, f)
		}
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].delay != want[j].delay {
			return want[i].delay > want[j].delay
		}
		return bytes.Compare(want[i].row[:], want[j].row[:]) > 0
	})
	q := wire.IndexQuery{ShardValue: "LAX", Where: []wire.IndexCond{{Field: "delay", Op: ">=", Value: 20}},
		OrderBy: "-delay", Limit: 4, Columns: []string{"BASE"}, Fields: []string{"delay", "date"}}
	var got []wire.IndexEntry
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("QueryIndex: more pages than entries")
		}
		page, err := cl.QueryIndex(ctx, "flights_by_origin", q)
		if err != nil {
			t.Fatalf("QueryIndex page %d: got %v, want nil", pages, err)
		}
		if page.Version != 1 {
			t.Fatalf("QueryIndex page %d: got version %d, want 1", pages, page.Version)
		}
		got = append(got, page.Entries...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if len(got) != len(want) {
		t.Fatalf("QueryIndex: got %d entries, want %d", len(got), len(want))
	}
	for i, e := range got {
		w := want[i]
		wantFields := map[string]any{"delay": json.Number(fmt.Sprint(w.delay)), "date": w.date}
		if e.RowKey != w.row.String() || !reflect.DeepEqual(e.Fields, wantFields) {
			t.Errorf("entry %d: got %s %v, want %s %v", i, e.RowKey, e.Fields, w.row, wantFields)
		}
		if base, ok := e.Cells["BASE"]; !ok || base.RefKey != 1 || !bytes.Contains(base.Body, []byte(fmt.Sprintf(`"delay":%d`, w.delay))) {
			t.Errorf("entry %d: got BASE cell %+v, want the flight's", i, e.Cells)
		}
	}
	stale, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "SFO", Where: []wire.IndexCond{{Field: "date", Op: "in",
		Value: []any{"2001-01-01T10:00:00Z", "2001-01-02T10:00:00Z"}}}}, client.WithConsistency(client.ConsistencyStale))
	wantSFO := 0
	for _, f := range flights {
		if f.origin == "SFO" && (f.date == "2001-01-01T10:00:00Z" || f.date == "2001-01-02T10:00:00Z") {
			wantSFO++
		}
	}
	if err != nil || len(stale.Entries) != wantSFO || stale.NextCursor != "" {
		t.Errorf("stale QueryIndex: got %d entries, cursor %q, %v; want %d and no cursor", len(stale.Entries), stale.NextCursor, err, wantSFO)
	}

	// Errors name their field, and come with their sentinel.
	var ae *client.APIError
	_, err = cl.DefineIndex(ctx, []byte("table: x\ncolumn_defs:\n  - column_key: BASE\n    fields:\n      - {field: a, type: money}\n"))
	if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Field != "column_defs[0].fields[0].type" {
		t.Errorf("DefineIndex with an unknown type: got %v, want ErrInvalidArgument naming column_defs[0].fields[0].type", err)
	}
	_, err = cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "LAX", Where: []wire.IndexCond{{Field: "delay", Op: "~", Value: 1}}})
	if !errors.Is(err, client.ErrInvalidArgument) || !errors.As(err, &ae) || ae.Field != "where[0].op" || ae.StatusCode != http.StatusBadRequest {
		t.Errorf("QueryIndex with a bad op: got %v, want a 400 naming where[0].op", err)
	}
	if _, err = cl.QueryIndex(ctx, "nope", wire.IndexQuery{ShardValue: "LAX"}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("QueryIndex of an unknown index: got %v, want ErrNotFound", err)
	}
	if _, err = cl.AliasIndex(ctx, "flights_by_origin", 7); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("AliasIndex to an unknown version: got %v, want ErrNotFound", err)
	}
	if _, err = cl.AliasIndex(ctx, "flights_by_origin", 0); !errors.Is(err, client.ErrInvalidArgument) || errors.As(err, &ae) {
		t.Errorf("AliasIndex to version 0: got %v, want ErrInvalidArgument, unsent", err)
	}
	if _, err = cl.Index(ctx, ""); !errors.Is(err, client.ErrInvalidArgument) {
		t.Errorf("Index with no name: got %v, want ErrInvalidArgument", err)
	}

	// A new version, built beside the first, then the switch and the drop of version 1.
	res, err = cl.DefineIndex(ctx, []byte(itIndexDef+"      - { field: distance, type: int }\n"))
	if err != nil || res.Version != 2 || !res.Created {
		t.Fatalf("DefineIndex version 2: got %+v, %v, want version 2 created", res, err)
	}
	if _, err := cl.AliasIndex(ctx, "flights_by_origin", 2); err != nil && !errors.Is(err, client.ErrConflict) {
		t.Errorf("AliasIndex to version 2 while it builds: got %v, want nil (already ready) or ErrConflict", err)
	}
	itWaitIndex(t, ctx, cl, "flights_by_origin", 2, int64(len(flights)))
	if _, err := cl.DropIndexVersion(ctx, "flights_by_origin", 1); !errors.Is(err, client.ErrConflict) {
		t.Errorf("DropIndexVersion of the alias target: got %v, want ErrConflict", err)
	}
	if al, err := cl.AliasIndex(ctx, "flights_by_origin", 2); err != nil || al.Alias != 2 {
		t.Fatalf("AliasIndex 2: got %+v, %v, want alias 2", al, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "JFK", Where: []wire.IndexCond{{Field: "distance", Op: ">", Value: 0}}, Limit: 1})
		if err != nil {
			t.Fatalf("QueryIndex after the switch: got %v, want nil", err)
		}
		if page.Version == 2 && len(page.Entries) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("QueryIndex 10s after the switch: got %+v, want version 2 with its distance field", page)
		}
		time.Sleep(100 * time.Millisecond)
	}
	dr, err := cl.DropIndexVersion(ctx, "flights_by_origin", 1)
	if err != nil || (dr.State != wire.IndexDropped && dr.State != wire.IndexDropping) {
		t.Fatalf("DropIndexVersion 1: got %+v, %v, want dropping or dropped", dr, err)
	}
	// Dropping again is idempotent.
	if _, err := cl.DropIndexVersion(ctx, "flights_by_origin", 1); err != nil {
		t.Errorf("DropIndexVersion 1 again: got %v, want nil", err)
	}
	if _, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "JFK", Version: 1}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("QueryIndex of the dropped version: got %v, want ErrNotFound", err)
	}

	// With one node down, the calls fail over to the others.
	c.StopNode(0)
	st, err := cl.Index(ctx, "flights_by_origin")
	if err != nil || st.Alias != 2 {
		t.Fatalf("Index with node 0 down: got %+v, %v, want alias 2", st, err)
	}
	for i := 0; i < 3; i++ {
		page, err := cl.QueryIndex(ctx, "flights_by_origin", wire.IndexQuery{ShardValue: "LAX", Limit: 100})
		if err != nil || len(page.Entries) != 15 {
			t.Fatalf("QueryIndex with node 0 down: got %d entries, %v, want 15", len(page.Entries), err)
		}
	}
}
