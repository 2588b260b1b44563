package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/maintainer"
)

// TestIndexCommands runs `index build --switch`, `index status` and `index query` against a
// 3-node cluster whose nodes run the index maintainer.
func TestIndexCommands(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Indexes: true, Maintainer: maintainer.Config{SessionTimeout: 10 * time.Second}})
	cfg := client.DefaultConfig()
	cfg.Endpoints = c.URLs()
	cfg.Datastore = "trips"
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := cl.PutCells(ctx, writes); err != nil {
		t.Fatalf("PutCells: %v", err)
	}
	def := filepath.Join(t.TempDir(), "def.yaml")
	if err := os.WriteFile(def, []byte(`table: by_origin
shard_field: origin
column_defs:
  - column_key: BASE
    fields:
      - { field: origin, type: string }
      - { field: delay, type: int }
      - { field: destination, type: string }
      - { field: date, type: datetime }
`), 0o644); err != nil {
		t.Fatal(err)
	}

	var out, progress bytes.Buffer
	if err := runIndexBuild(ctx, cl, indexBuildFlags{file: def, switchTo: true, poll: 200 * time.Millisecond}, &out, &progress); err != nil {
		t.Fatalf("index build: %v\n%s", err, out.String())
	}
	for _, want := range []string{"index by_origin version 1: defined, building", "index by_origin version 1: ready, ", "index by_origin: queries use version 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("index build output: got %q, want a line with %q", out.String(), want)
		}
	}
	if !strings.Contains(progress.String(), "ready") || !strings.Contains(progress.String(), "cells") {
		t.Errorf("index build progress: got %q, want a progress line ending ready", progress.String())
	}
	out.Reset()
	if err := runIndexBuild(ctx, cl, indexBuildFlags{file: def}, &out, &progress); err != nil || !strings.Contains(out.String(), "version 1: unchanged, ready") {
		t.Errorf("index build again: got %q, %v, want version 1 unchanged and ready", out.String(), err)
	}

	// Wait until every flight is indexed (ready allows a short lag).
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := cl.Index(ctx, "by_origin")
		if err == nil && len(st.Versions) == 1 && st.Versions[0].Entries == int64(len(flights)) && st.Versions[0].LagCells == 0 {
			var buf bytes.Buffer
			if err := printIndexStatus(&buf, st); err != nil || !strings.Contains(buf.String(), "SHARD  OWNER") || !strings.Contains(buf.String(), "queries use version 1") {
				t.Errorf("index status by_origin: got %q, %v, want the versions and a shard table", buf.String(), err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("by_origin not caught up after 60s: %+v, %v", st, err)
		}
		time.Sleep(200 * time.Millisecond)
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
	if err := runIndexQuery(ctx, cl, "by_origin", qf, client.ConsistencyStrong, &out, &errOut); err != nil {
		t.Fatalf("index query --all --json: %v", err)
	}
	var got []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var e wire.IndexEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("index query --json line %q: %v", sc.Text(), err)
		}
		if len(e.Fields) != 1 {
			t.Errorf("index query --fields delay: got fields %v, want delay only", e.Fields)
		}
		got = append(got, e.RowKey)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("index query --all: got %v, want %v (by row key)", got, want)
	}

	// One page as a table, with the next cursor on stderr.
	out.Reset()
	errOut.Reset()
	qf = indexQueryFlags{shardValue: "SFO", orderBy: "-delay", limit: 3, columns: []string{"BASE"}}
	if err := runIndexQuery(ctx, cl, "by_origin", qf, client.ConsistencyStale, &out, &errOut); err != nil {
		t.Fatalf("index query table: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ROW_KEY") || !strings.Contains(lines[0], "BASE") || !strings.Contains(errOut.String(), "--cursor ") {
		t.Errorf("index query table: got %q and stderr %q, want a header, 3 rows and the next cursor", out.String(), errOut.String())
	}

	// A bad condition names its field.
	err = runIndexQuery(ctx, cl, "by_origin", indexQueryFlags{shardValue: "SFO", where: []string{"delay>soon"}}, client.ConsistencyStrong, &out, &errOut)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Field != "where[0].value" || !strings.Contains(err.Error(), "(field where[0].value)") {
		t.Errorf("index query with a bad value: got %v, want an error naming where[0].value", err)
	}
}
