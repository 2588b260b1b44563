package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/workload"
)

// The example index of `schemaless dev`: the flights sharded on their origin airport, a
// deliberately skewed shard field (a few hubs hold most flights, like the city ids the
// Schemaless paper warns about), with the fields the example queries filter and sort on.
const (
	devIndexName = "flights_by_origin"
	// devIndexDefinition is also in testdata/indexes/flights_by_origin.yaml.
	devIndexDefinition = `table: flights_by_origin
datastore: trips
column_defs:
  - column_key: BASE
    fields:
      - { field: origin, type: string }       # the shard field
      - { field: date, type: datetime }
      - { field: destination, type: string }
      - { field: delay, type: int }
      - { field: distance, type: int }
`
	// devIndexCatchUp bounds the wait for the index to catch up after an import.
	devIndexCatchUp = 10 * time.Minute
)

// devExample is an example query of the dev index and the brute-force filter that must give
// the same flights.
type devExample struct {
	title string
	query wire.IndexQuery
	match func(f workload.Flight) bool
}

func devExamples() []devExample {
	return []devExample{
		{
			title: "flights out of ORD on 2001-01-03 with delay over 60 minutes, worst first",
			query: wire.IndexQuery{ShardValue: "ORD", OrderBy: "-delay", Limit: 100, Where: []wire.IndexCond{
				{Field: "date", Op: ">=", Value: "2001-01-03"}, {Field: "date", Op: "<", Value: "2001-01-04"}, {Field: "delay", Op: ">", Value: 60}}},
			match: func(f workload.Flight) bool {
				return f.Origin == "ORD" && strings.HasPrefix(f.Date, "2001-01-03") && f.Delay > 60
			},
		},
		{
			title: "flights out of ATL to LAX or SFO longer than 1,500 miles, by date",
			query: wire.IndexQuery{ShardValue: "ATL", OrderBy: "date", Limit: 100, Columns: []string{"BASE"}, Where: []wire.IndexCond{
				{Field: "destination", Op: "in", Value: []any{"LAX", "SFO"}}, {Field: "distance", Op: ">", Value: 1500}}},
			match: func(f workload.Flight) bool {
				return f.Origin == "ATL" && (f.Destination == "LAX" || f.Destination == "SFO") && f.Distance > 1500
			},
		},
		{
			title: "flights out of DEN that left early (delay below 0), not to SLC",
			query: wire.IndexQuery{ShardValue: "DEN", Limit: 1000, Fields: []string{"destination", "delay"}, Where: []wire.IndexCond{
				{Field: "delay", Op: "<", Value: 0}, {Field: "destination", Op: "!=", Value: "SLC"}}},
			match: func(f workload.Flight) bool {
				return f.Origin == "DEN" && f.Delay < 0 && f.Destination != "SLC"
			},
		},
	}
}

// defineDevIndex defines the example index (before the import, so it is built as cells land;
// on a datastore that already holds flights the definition is a backfill).
func defineDevIndex(ctx context.Context, cl *client.Client) error {
	res, err := cl.DefineIndex(ctx, []byte(devIndexDefinition))
	if err != nil {
		return fmt.Errorf("define index %s: %w", devIndexName, err)
	}
	fmt.Printf("index %s version %d: %s (sharded on origin)\n", res.Index, res.Version, res.State)
	return nil
}

// devIndexWatch measures how long after an import the index holds an entry for every imported
// flight: started when the import ends, read by reportDevIndex.
type devIndexWatch struct {
	done    chan struct{}
	elapsed time.Duration
	status  wire.IndexVersionStatus
	err     error
}

// watchDevIndex polls the index status every 100ms from now until the alias version is ready
// and holds want entries.
func watchDevIndex(ctx context.Context, cl *client.Client, want int64) *devIndexWatch {
	w := &devIndexWatch{done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(w.done)
		deadline := start.Add(devIndexCatchUp)
		for {
			s, err := cl.Index(ctx, devIndexName)
			if err == nil {
				for _, v := range s.Versions {
					if v.Version == s.Alias {
						w.status = v
					}
				}
				if w.status.State == wire.IndexReady && w.status.Entries >= want {
					w.elapsed = time.Since(start)
					return
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				w.err = fmt.Errorf("index %s holds %d of %d entries %s after the import (state %q, last error %v)",
					devIndexName, w.status.Entries, want, devIndexCatchUp, w.status.State, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

// reportDevIndex waits until the index holds every imported flight, runs the example queries
// (every page) and checks each against a brute-force scan of the imported flights.
func reportDevIndex(ctx context.Context, cl *client.Client, flights []workload.Flight, w *devIndexWatch) error {
	<-w.done
	if w.err != nil {
		return w.err
	}
	fmt.Printf("index %s: every flight indexed %.1fs after the import (%d entries, %d shard-field violations)\n",
		devIndexName, w.elapsed.Seconds(), w.status.Entries, w.status.Violations)

	for _, ex := range devExamples() {
		want := map[string]workload.Flight{}
		for _, fl := range flights {
			if ex.match(fl) {
				want[fl.RowKey().String()] = fl
			}
		}
		start := time.Now()
		var got []wire.IndexEntry
		pages := 0
		q := ex.query
		for {
			res, err := cl.QueryIndex(ctx, devIndexName, q)
			if err != nil {
				return fmt.Errorf("query %q: %w", ex.title, err)
			}
			pages++
			got = append(got, res.Entries...)
			if res.NextCursor == "" {
				break
			}
			q.Cursor = res.NextCursor
		}
		el := time.Since(start)
		missing, unexpected := 0, 0
		seen := map[string]bool{}
		for _, e := range got {
			if _, ok := want[e.RowKey]; !ok || seen[e.RowKey] {
				unexpected++
			}
			seen[e.RowKey] = true
		}
		for rk := range want {
			if !seen[rk] {
				missing++
			}
		}
		fmt.Printf("\n%s\n  %d flights in %d page(s), %.1f ms; brute-force scan of the flights: %d (missing %d, unexpected %d)\n",
			ex.title, len(got), pages, float64(el.Microseconds())/1000, len(want), missing, unexpected)
		for i, e := range got {
			if i == 5 {
				fmt.Printf("  ... %d more\n", len(got)-5)
				break
			}
			fmt.Printf("  %s %s\n", e.RowKey, fieldsLine(e.Fields))
		}
		if missing > 0 || unexpected > 0 {
			return fmt.Errorf("query %q: %d flights missing and %d unexpected", ex.title, missing, unexpected)
		}
	}
	fmt.Printf("\ntry:\n  bin/schemaless index status %s\n  bin/schemaless index query %s --shard-value ORD --where 'delay>120' --order-by -delay --limit 5\n",
		devIndexName, devIndexName)
	return nil
}

// fieldsLine renders an entry's fields as "name=value" pairs in name order.
func fieldsLine(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, m[k])
	}
	return strings.Join(parts, " ")
}

// readDevFlights reads the imported flights (the same file and limit as the import).
func readDevFlights(f devFlags) ([]workload.Flight, error) {
	r, _, closeFile, err := openFlights(f.importPath, f.airports)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	var out []workload.Flight
	for {
		fl, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fl)
		if f.importOpts.limit > 0 && len(out) >= f.importOpts.limit {
			return out, nil
		}
	}
}
