package api_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/api"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/wire"
)

// eraseOneYAML indexes one column: its maintainers read the shard logs filtered by that column,
// which must still bring the tombstones. eraseTwoYAML indexes two columns (no filter).
const (
	eraseOneYAML = `
table: erase_one
datastore: trips
shard_field: driver
column_defs:
  - column_key: BASE
    fields:
      - { field: driver, type: string }
      - { field: fare, type: int }
`
	eraseTwoYAML = `
table: erase_two
datastore: trips
shard_field: driver
column_defs:
  - column_key: BASE
    fields:
      - { field: driver, type: string }
  - column_key: STATUS
    fields:
      - { field: status, type: string }
`
)

// TestEraseIndexEntries: an erased row's index entries are deleted by the maintainers, from an
// index of one column (filtered log reads) and of two, in raft mode on each engine and in async
// mode; the row written again after the erasure gets a new entry from its new cells only.
func TestEraseIndexEntries(t *testing.T) {
	t.Parallel()
	for _, engine := range []clustertest.Engine{clustertest.SQLite, clustertest.Pebble, clustertest.MySQL, clustertest.Async} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, clustertest.Options{Engine: engine, Indexes: true, API: api.Config{MaxIndexRequestBytes: 64 << 10},
				Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
			s := &session{c: c}
			testEraseIndexEntries(t, s)
		})
	}
}

// driverRows queries index name for the entries of driver and returns their row keys, sorted,
// and the fare field of each.
func (s *session) driverRows(t *testing.T, name, driver string) ([]string, map[string]any) {
	t.Helper()
	a := s.query(t, 0, name, map[string]any{"shard_value": driver, "limit": 1000}, "")
	require.Equal(t, 200, a.status, "query %s for %s: %s", name, driver, a.raw)
	var keys []string
	fares := map[string]any{}
	for _, e := range a.res.Entries {
		keys = append(keys, e.RowKey)
		fares[e.RowKey] = e.Fields["fare"]
	}
	sort.Strings(keys)
	return keys, fares
}

func testEraseIndexEntries(t *testing.T, s *session) {
	var rows []uuid.UUID
	var cs []wire.PutCell
	for i := 0; i < 12; i++ {
		rk := uuid.NewSHA1(uuid.NameSpaceDNS, []byte(fmt.Sprint("erase-index", i)))
		rows = append(rows, rk)
		cs = append(cs, putCell(t, rk, "BASE", 1, map[string]any{"driver": "dana", "fare": i}))
		cs = append(cs, putCell(t, rk, "STATUS", 1, map[string]any{"status": "open"}))
	}
	s.putCells(t, cs)
	for _, y := range []string{eraseOneYAML, eraseTwoYAML} {
		s.doRetry(t, 1, "POST", "/v1/trips/indexes", y).expect(t, 201)
	}
	s.waitCaughtUp(t, "erase_one", 1, int64(len(rows)))
	s.waitCaughtUp(t, "erase_two", 1, int64(len(rows)))

	gone := rows[3]
	var res wire.EraseResult
	s.doRetry(t, 2, "DELETE", "/v1/trips/cells/"+gone.String(), "").expect(t, 200).decode(t, &res)
	require.Equal(t, 2, res.Erased, "erase: cells erased (%+v)", res)

	want := make([]string, 0, len(rows)-1)
	for _, rk := range rows {
		if rk != gone {
			want = append(want, rk.String())
		}
	}
	sort.Strings(want)
	for _, name := range []string{"erase_one", "erase_two"} {
		s.waitCaughtUp(t, name, 1, int64(len(rows)-1))
		got, _ := s.driverRows(t, name, "dana")
		assert.Equal(t, want, got, "%s after the erasure: the erased row's entry is gone, the others stay", name)
	}

	// Written again, with a new driver and fare: a new entry from the new cells only.
	s.putCells(t, []wire.PutCell{putCell(t, gone, "BASE", 1, map[string]any{"driver": "erin", "fare": 99})})
	s.waitCaughtUp(t, "erase_one", 1, int64(len(rows)))
	got, fares := s.driverRows(t, "erase_one", "erin")
	require.Equal(t, []string{gone.String()}, got, "erase_one after the row was written again: its new entry")
	assert.Equal(t, json.Number("99"), fares[gone.String()], "erase_one: the new entry's fare, from the new cell")
	dana, _ := s.driverRows(t, "erase_one", "dana")
	assert.Equal(t, want, dana, "erase_one after the row was written again: no entry under the erased shard value")
}
