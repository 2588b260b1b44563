package examples

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// The example index: the flights sharded on their origin airport, a deliberately skewed shard
// field (a few hubs hold most flights, like the city ids the Schemaless paper warns about), with
// the fields the example queries filter and sort on.
const (
	// IndexName is the example index's name.
	IndexName = "flights_by_origin"
	// IndexDefinition is the example index of datastore trips (YAML); also in
	// testdata/indexes/flights_by_origin.yaml.
	IndexDefinition = `table: flights_by_origin
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
	// IndexCatchUp bounds the wait for the index to catch up after an import (WatchIndex).
	IndexCatchUp = 10 * time.Minute
)

// Example is an example query of the index (Title describes it) and Match, the brute-force
// filter of the flights that must give the same flights.
type Example struct {
	Title string
	Query wire.IndexQuery
	Match func(f workload.Flight) bool
}

// Examples returns the example queries.
func Examples() []Example {
	return []Example{
		{
			Title: "flights out of ORD on 2001-01-03 with delay over 60 minutes, worst first",
			Query: wire.IndexQuery{ShardValue: "ORD", OrderBy: "-delay", Limit: 100, Where: []wire.IndexCond{
				{Field: "date", Op: ">=", Value: "2001-01-03"}, {Field: "date", Op: "<", Value: "2001-01-04"}, {Field: "delay", Op: ">", Value: 60}}},
			Match: func(f workload.Flight) bool {
				return f.Origin == "ORD" && strings.HasPrefix(f.Date, "2001-01-03") && f.Delay > 60
			},
		},
		{
			Title: "flights out of ATL to LAX or SFO longer than 1,500 miles, by date",
			Query: wire.IndexQuery{ShardValue: "ATL", OrderBy: "date", Limit: 100, Columns: []string{"BASE"}, Where: []wire.IndexCond{
				{Field: "destination", Op: "in", Value: []any{"LAX", "SFO"}}, {Field: "distance", Op: ">", Value: 1500}}},
			Match: func(f workload.Flight) bool {
				return f.Origin == "ATL" && (f.Destination == "LAX" || f.Destination == "SFO") && f.Distance > 1500
			},
		},
		{
			Title: "flights out of DEN that left early (delay below 0), not to SLC",
			Query: wire.IndexQuery{ShardValue: "DEN", Limit: 1000, Fields: []string{"destination", "delay"}, Where: []wire.IndexCond{
				{Field: "delay", Op: "<", Value: 0}, {Field: "destination", Op: "!=", Value: "SLC"}}},
			Match: func(f workload.Flight) bool {
				return f.Origin == "DEN" && f.Delay < 0 && f.Destination != "SLC"
			},
		},
	}
}

// DefineIndex defines the example index through cl and prints its version to out (before an
// import it is built as cells land; on a datastore that already holds flights the definition is
// a backfill).
func DefineIndex(ctx context.Context, cl *client.Client, out io.Writer) error {
	res, err := cl.DefineIndex(ctx, []byte(IndexDefinition))
	if err != nil {
		return fmt.Errorf("define index %s: %w", IndexName, err)
	}
	fmt.Fprintf(out, "index %s version %d: %s (sharded on origin)\n", res.Index, res.Version, res.State)
	return nil
}

// IndexWatch measures how long after an import the index holds an entry for every imported
// flight: started when the import ends (WatchIndex), read by ReportIndex.
type IndexWatch struct {
	done    chan struct{}
	elapsed time.Duration
	status  wire.IndexVersionStatus
	err     error
}

// WatchIndex polls the index status every 100ms from now, in a goroutine, until the alias version
// is ready and holds want entries, or IndexCatchUp passes.
func WatchIndex(ctx context.Context, cl *client.Client, want int64) *IndexWatch {
	w := &IndexWatch{done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(w.done)
		deadline := start.Add(IndexCatchUp)
		for {
			s, err := cl.Index(ctx, IndexName)
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
					IndexName, w.status.Entries, want, IndexCatchUp, w.status.State, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return w
}

// ReportIndex waits until the index holds every imported flight (w), runs the example queries
// (every page) and checks each against a brute-force scan of flights, printing each query's
// figures and first entries to out. It fails when the index did not catch up, a query fails, or
// a query's flights differ from the scan's.
func ReportIndex(ctx context.Context, cl *client.Client, flights []workload.Flight, w *IndexWatch, out io.Writer) error {
	<-w.done
	if w.err != nil {
		return w.err
	}
	fmt.Fprintf(out, "index %s: every flight indexed %.1fs after the import (%d entries, %d shard-field violations)\n",
		IndexName, w.elapsed.Seconds(), w.status.Entries, w.status.Violations)

	for _, ex := range Examples() {
		want := map[string]workload.Flight{}
		for _, fl := range flights {
			if ex.Match(fl) {
				want[fl.RowKey().String()] = fl
			}
		}
		start := time.Now()
		var got []wire.IndexEntry
		pages := 0
		q := ex.Query
		for {
			res, err := cl.QueryIndex(ctx, IndexName, q)
			if err != nil {
				return fmt.Errorf("query %q: %w", ex.Title, err)
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
		fmt.Fprintf(out, "\n%s\n  %d flights in %d page(s), %.1f ms; brute-force scan of the flights: %d (missing %d, unexpected %d)\n",
			ex.Title, len(got), pages, float64(el.Microseconds())/1000, len(want), missing, unexpected)
		for i, e := range got {
			if i == 5 {
				fmt.Fprintf(out, "  ... %d more\n", len(got)-5)
				break
			}
			fmt.Fprintf(out, "  %s %s\n", e.RowKey, FieldsLine(e.Fields))
		}
		if missing > 0 || unexpected > 0 {
			return fmt.Errorf("query %q: %d flights missing and %d unexpected", ex.Title, missing, unexpected)
		}
	}
	fmt.Fprintf(out, "\ntry:\n  bin/schemaless index status %s\n  bin/schemaless index query %s --shard-value ORD --where 'delay>120' --order-by -delay --limit 5\n",
		IndexName, IndexName)
	return nil
}

// FieldsLine renders an entry's fields as "name=value" pairs in name order.
func FieldsLine(m map[string]any) string {
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

// FlightsIndexDefinition is the definition (YAML) of an index named name over the flight fields
// of column's cells (origin, date, destination, delay, distance), sharded by origin: the fields of
// IndexDefinition, for any name and column, in the datastore of the client that defines it.
func FlightsIndexDefinition(name, column string) []byte {
	return []byte(fmt.Sprintf(`table: %s
column_defs:
  - column_key: %s
    fields:
      - { field: origin, type: string }
      - { field: date, type: datetime }
      - { field: destination, type: string }
      - { field: delay, type: int }
      - { field: distance, type: int }
`, name, column))
}
