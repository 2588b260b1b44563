package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
	"github.com/schemaless-db/schemaless/wire"
)

// TestIndexCommands runs `index build --switch`, `index status` and `index query` against a
// 3-node cluster whose nodes run the index maintainer.
func TestIndexCommands(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
	cfg := client.DefaultConfig()
	cfg.Endpoints = c.URLs()
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err, "client.New")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type flight struct {
		row         uuid.UUID
		origin      string
		delay       int
		destination string
	}
	var flights []flight
	var writes []client.CellWrite
	for i := 0; i < 30; i++ {
		f := flight{row: uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprint("indexcmd", i))), origin: []string{"LAX", "SFO"}[i%2],
			delay: i * 7 % 100, destination: []string{"JFK", "ORD", "SFO"}[i%3]}
		flights = append(flights, f)
		writes = append(writes, client.CellWrite{Key: cells.Key{RowKey: f.row, ColumnKey: "BASE", RefKey: 1},
			Body: json.RawMessage(fmt.Sprintf(`{"origin":%q,"delay":%d,"destination":%q,"date":"2001-01-0%d"}`, f.origin, f.delay, f.destination, 1+i%3))})
	}
	_, err = cl.PutCells(ctx, writes)
	require.NoError(t, err, "PutCells")
	def := filepath.Join(t.TempDir(), "def.yaml")
	require.NoError(t, os.WriteFile(def, []byte(`table: by_origin
shard_field: origin
column_defs:
  - column_key: BASE
    fields:
      - { field: origin, type: string }
      - { field: delay, type: int }
      - { field: destination, type: string }
      - { field: date, type: datetime }
`), 0o644), "write the index definition")

	var out, progress bytes.Buffer
	err = runIndexBuild(ctx, cl, indexBuildFlags{file: def, switchTo: true, poll: 200 * time.Millisecond}, &out, &progress)
	require.NoError(t, err, "index build:\n%s", out.String())
	for _, want := range []string{"index by_origin version 1: defined, building", "index by_origin version 1: ready, ", "index by_origin: queries use version 1"} {
		assert.Contains(t, out.String(), want, "index build output: want a line with it")
	}
	assert.True(t, strings.Contains(progress.String(), "ready") && strings.Contains(progress.String(), "cells"),
		"index build progress: got %q, want a progress line ending ready", progress.String())
	out.Reset()
	err = runIndexBuild(ctx, cl, indexBuildFlags{file: def}, &out, &progress)
	if assert.NoError(t, err, "index build again") {
		assert.Contains(t, out.String(), "version 1: unchanged, ready", "index build again: want version 1 unchanged and ready")
	}

	// Wait until every flight is indexed (ready allows a short lag).
	var st wire.IndexStatus
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		st, err = cl.Index(ctx, "by_origin")
		require.NoError(c, err, "Index by_origin")
		require.Len(c, st.Versions, 1, "versions of by_origin")
		assert.Equal(c, int64(len(flights)), st.Versions[0].Entries, "entries")
		assert.Zero(c, st.Versions[0].LagCells, "lag cells")
	}, 60*time.Second, 200*time.Millisecond, "by_origin caught up: one version, every flight indexed, no lag")
	var buf bytes.Buffer
	if assert.NoError(t, printIndexStatus(&buf, st), "index status by_origin") {
		assert.Contains(t, buf.String(), "SHARD  OWNER", "index status by_origin: want a shard table")
		assert.Contains(t, buf.String(), "queries use version 1", "index status by_origin: want the versions")
	}

	// --all --json through pages of 2: every LAX flight with delay > 20 going to JFK or SFO.
	var want []string
	for _, f := range flights {
		if f.origin == "LAX" && f.delay > 20 && (f.destination == "JFK" || f.destination == "SFO") {
			want = append(want, f.row.String())
		}
	}
	sort.Strings(want)
	out.Reset()
	var errOut bytes.Buffer
	qf := indexQueryFlags{shardValue: "LAX", where: []string{"delay>20", "destination in JFK,SFO"}, fields: []string{"delay"}, limit: 2, all: true, asJSON: true}
	require.NoError(t, runIndexQuery(ctx, cl, "by_origin", qf, client.ConsistencyStrong, &out, &errOut), "index query --all --json")
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var e wire.IndexEntry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), "index query --json line %q", sc.Text())
		assert.Len(t, e.Fields, 1, "index query --fields delay: want delay only")
		got = append(got, e.RowKey)
	}
	assert.Equal(t, strings.Join(want, ","), strings.Join(got, ","), "index query --all: row keys")

	// One page as a table, with the next cursor on stderr.
	out.Reset()
	errOut.Reset()
	qf = indexQueryFlags{shardValue: "SFO", orderBy: "-delay", limit: 3, columns: []string{"BASE"}}
	require.NoError(t, runIndexQuery(ctx, cl, "by_origin", qf, client.ConsistencyStale, &out, &errOut), "index query table")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.True(t, len(lines) == 4 && strings.HasPrefix(lines[0], "ROW_KEY") && strings.Contains(lines[0], "BASE") && strings.Contains(errOut.String(), "--cursor "),
		"index query table: got %q and stderr %q, want a header, 3 rows and the next cursor", out.String(), errOut.String())

	// A bad condition names its field.
	err = runIndexQuery(ctx, cl, "by_origin", indexQueryFlags{shardValue: "SFO", where: []string{"delay>soon"}}, client.ConsistencyStrong, &out, &errOut)
	var ae *client.APIError
	if assert.ErrorAs(t, err, &ae, "index query with a bad value: want an API error") {
		assert.Equal(t, "where[0].value", ae.Field, "index query with a bad value: the field named")
		assert.ErrorContains(t, err, "(field where[0].value)", "index query with a bad value")
	}
}
