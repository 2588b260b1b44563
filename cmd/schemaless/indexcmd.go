package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/spf13/cobra"
)

func newIndexCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Define, watch, switch, drop and query secondary indexes",
		Long: `A secondary index maps the values of fields of a datastore's cells to their row keys, sharded by
one field (the shard field), so that a query naming a shard field value reads one index shard.
An index is defined in YAML, in the Schemaless paper's form:

  table: flights_by_origin          # the index's name
  datastore: trips                  # optional; must be --datastore
  shard_field: origin               # optional; default: the first field
  column_defs:
    - column_key: BASE
      fields:
        - { field: origin, type: string }
        - { field: date, type: datetime }
        - { field: delay, type: int }
        - { field: destination, type: string }

Types: UUID, string, int, float, bool, datetime. Every node runs the index maintainer: a new
definition (or a changed one: a new version of the index) is built in the background from the
shard logs, and becomes ready when caught up. The first ready version of an index answers its
queries (the alias); 'index alias' switches the alias to a newer ready version, and 'index drop'
deletes a version's tables.

  build    define an index (a new version when the definition changed), optionally wait and switch
  status   list indexes and versions with state, entries, violations, progress and lag
  alias    point an index's queries at a ready version
  drop     drop a version
  query    query an index`,
	}
	cmd.AddCommand(newIndexBuildCmd(), newIndexStatusCmd(), newIndexAliasCmd(), newIndexDropCmd(), newIndexQueryCmd())
	return cmd
}

// indexBuildFlags are the flags of `index build`.
type indexBuildFlags struct {
	file     string
	wait     bool
	switchTo bool
	poll     time.Duration
}

func newIndexBuildCmd() *cobra.Command {
	var cf clientFlags
	var f indexBuildFlags
	cmd := &cobra.Command{
		Use:   "build -f DEFINITION.yaml",
		Short: "Define an index and optionally wait for its build, then switch queries to it",
		Long: `Define an index from a YAML (or JSON) file ('-' reads stdin). A new index, or a changed definition of
an existing one, creates a new version, built in the background by the maintainers of every node
from the shard logs (the datastore keeps serving). The same definition again changes nothing and
names the existing version.

--wait shows the build's progress until the version is ready: the share and count of the shard
logs' cells handled, the lag (cells not handled yet, and the age of the oldest) and the rate.
--switch (implies --wait) then points the index's alias at the new version, so that queries use it;
the first ready version of an index becomes its alias by itself.`,
		Example: `  schemaless index build -f flights_by_origin.yaml --wait
  schemaless index build -f flights_by_origin_v2.yaml --switch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			return runIndexBuild(ctx, cl, f, os.Stdout, os.Stderr)
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "the index definition, YAML or JSON ('-': stdin) (required)")
	fl.BoolVar(&f.wait, "wait", false, "show the build's progress until the version is ready")
	fl.BoolVar(&f.switchTo, "switch", false, "once ready, point the index's alias at the version (implies --wait)")
	fl.DurationVar(&f.poll, "poll", time.Second, "how often --wait reads the progress")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// runIndexBuild defines the index of f.file and, with --wait or --switch, follows its build.
func runIndexBuild(ctx context.Context, cl *client.Client, f indexBuildFlags, out, progress io.Writer) error {
	var def []byte
	var err error
	if f.file == "-" {
		def, err = io.ReadAll(os.Stdin)
	} else {
		def, err = os.ReadFile(f.file)
	}
	if err != nil {
		return err
	}
	res, err := cl.DefineIndex(ctx, def)
	if err != nil {
		return err // an *APIError names the definition's field at fault
	}
	what := "defined"
	if !res.Created {
		what = "unchanged"
	}
	fmt.Fprintf(out, "index %s version %d: %s, %s\n", res.Index, res.Version, what, res.State)
	if !f.wait && !f.switchTo {
		return nil
	}
	v, err := followIndexBuild(ctx, cl, res.Index, res.Version, f.poll, progress)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "index %s version %d: ready, %d entries, %d violations\n", res.Index, res.Version, v.Entries, v.Violations)
	if f.switchTo {
		if _, err := cl.AliasIndex(ctx, res.Index, res.Version); err != nil {
			return err
		}
		fmt.Fprintf(out, "index %s: queries use version %d\n", res.Index, res.Version)
	}
	return nil
}

// isTerminal reports whether w is a character device, where a progress line can be redrawn.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// followIndexBuild waits until version of index name is ready (client.WaitIndexVersion, a read
// every poll), drawing a progress line on w (redrawn in place on a terminal, one line every 5s
// otherwise). It fails when the version is dropped meanwhile, or with ctx.
func followIndexBuild(ctx context.Context, cl *client.Client, name string, version int, poll time.Duration, w io.Writer) (wire.IndexVersionStatus, error) {
	term := isTerminal(w)
	var (
		rate     float64 // cells/s, smoothed
		lastCell int64
		lastAt   time.Time
		printed  time.Time
		drawn    bool
	)
	defer func() {
		if drawn && term {
			fmt.Fprintln(w)
		}
	}()
	return cl.WaitIndexVersion(ctx, name, version, poll, func(v wire.IndexVersionStatus) {
		now := time.Now()
		if !lastAt.IsZero() && now.After(lastAt) {
			r := float64(v.HandledCells-lastCell) / now.Sub(lastAt).Seconds()
			if rate == 0 {
				rate = r
			} else {
				rate = 0.7*rate + 0.3*r
			}
		}
		lastCell, lastAt = v.HandledCells, now
		line := progressLine(v, rate)
		if term {
			fmt.Fprintf(w, "\r\033[K%s", line)
			drawn = true
		} else if now.Sub(printed) >= 5*time.Second || v.State == wire.IndexReady {
			fmt.Fprintln(w, line)
			printed = now
		}
	})
}

// progressLine renders a version's build progress: state, bar, percent, cells handled of the
// total, lag and rate.
func progressLine(v wire.IndexVersionStatus, rate float64) string {
	const width = 24
	p := min(max(v.Progress, 0), 1)
	n := int(p * width)
	bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
	return fmt.Sprintf("%-8s [%s] %5.1f%%  %d/%d cells  lag %d cells %.1fs  %.0f cells/s  %d entries",
		v.State, bar, 100*p, v.HandledCells, v.TotalCells, v.LagCells, v.LagSeconds, max(rate, 0), v.Entries)
}

func newIndexStatusCmd() *cobra.Command {
	var cf clientFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "List indexes and their versions, or show one index with per-shard offsets",
		Long: `Without NAME, list every index of the datastore, one line per version: state (building, ready,
dropping, dropped), whether the alias points at it, entries, shard-field violations, build
progress, lag (cells of the shard logs not yet handled by the version's maintainers, and the age
of the oldest) and the maintainers working on it.

With NAME, also show each live version's shards: the maintainers' owner, committed offset
(-1: none yet), the shard's high water and lag.`,
		Example: `  schemaless index status
  schemaless index status flights_by_origin
  schemaless index status --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			if len(args) == 1 {
				st, err := cl.Index(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(st)
				}
				return printIndexStatus(os.Stdout, st)
			}
			list, err := cl.Indexes(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(list)
			}
			if len(list.Indexes) == 0 {
				fmt.Printf("no index in datastore %s\n", cl.Datastore())
				return nil
			}
			return printIndexes(os.Stdout, list.Indexes)
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status answer as JSON")
	return cmd
}

// printIndexes prints one line per version of every index.
func printIndexes(w io.Writer, ixs []wire.IndexStatus) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INDEX\tVERSION\tALIAS\tSTATE\tENTRIES\tVIOLATIONS\tPROGRESS\tLAG_CELLS\tLAG_SECONDS\tWORKERS")
	for _, ix := range ixs {
		for _, v := range ix.Versions {
			alias := ""
			if ix.Alias == v.Version {
				alias = "*"
			}
			if v.State == wire.IndexDropping || v.State == wire.IndexDropped {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t-\t-\t-\t-\t-\t-\n", ix.Name, v.Version, alias, v.State)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\t%.1f%%\t%d\t%.1f\t%d\n", ix.Name, v.Version, alias, v.State,
				v.Entries, v.Violations, 100*v.Progress, v.LagCells, v.LagSeconds, v.Workers)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, ix := range ixs {
		for _, v := range ix.Versions {
			if v.Error != "" {
				fmt.Fprintf(w, "%s version %d: %s\n", ix.Name, v.Version, v.Error)
			}
		}
	}
	return nil
}

// printIndexStatus prints one index: its versions, then each live version's shards.
func printIndexStatus(w io.Writer, st wire.IndexStatus) error {
	alias := "none (no version ready yet)"
	if st.Alias > 0 {
		alias = fmt.Sprintf("version %d", st.Alias)
	}
	fmt.Fprintf(w, "index %s: queries use %s\n\n", st.Name, alias)
	if err := printIndexes(w, []wire.IndexStatus{st}); err != nil {
		return err
	}
	for _, v := range st.Versions {
		if len(v.Shards) == 0 {
			continue
		}
		var fields []string
		for _, cd := range v.Definition.ColumnDefs {
			for _, f := range cd.Fields {
				fields = append(fields, cd.ColumnKey+"."+f.Field+" "+f.Type)
			}
		}
		shard := v.Definition.ShardField
		if shard == "" && len(v.Definition.ColumnDefs) > 0 && len(v.Definition.ColumnDefs[0].Fields) > 0 {
			shard = v.Definition.ColumnDefs[0].Fields[0].Field
		}
		fmt.Fprintf(w, "\nversion %d (table %s, created %s): shard field %s; fields %s\n", v.Version, v.Table,
			v.CreatedAt.UTC().Format(time.RFC3339), shard, strings.Join(fields, ", "))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SHARD\tOWNER\tOFFSET\tHIGH_WATER\tLAG_CELLS\tLAG_SECONDS")
		for _, s := range v.Shards {
			owner := s.Owner
			if owner == "" {
				owner = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.1f\n", s.Shard, owner, s.Offset, s.HighWater, s.LagCells, s.LagSeconds)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// parseIndexVersion parses a version argument.
func parseIndexVersion(s string) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("version %q: want an integer of 1 or more", s)
	}
	return v, nil
}

func newIndexAliasCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "alias NAME VERSION",
		Short: "Point an index's queries at a ready version",
		Long: `Point the alias of index NAME at VERSION, which must be ready (see 'index status'): queries that
name no version use it from then on, on every node within the server's --index-catalog-ttl
(500ms by default). Switching back to an older ready version is allowed.`,
		Example: "  schemaless index alias flights_by_origin 2",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseIndexVersion(args[1])
			if err != nil {
				return err
			}
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.AliasIndex(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			fmt.Printf("index %s: queries use version %d\n", res.Index, res.Alias)
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

func newIndexDropCmd() *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "drop NAME VERSION",
		Short: "Drop a version of an index: its maintainers stop and its tables are deleted",
		Long: `Drop VERSION of index NAME: it is marked dropping, its maintainers stop, its tables are deleted on
every partition, and it is marked dropped. Its number is never reused. The alias target cannot be
dropped while the index has another live version: switch the alias first (and let the switch reach
every node, --index-catalog-ttl). Dropping the only version of an index leaves it without alias.`,
		Example: "  schemaless index drop flights_by_origin 1",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := parseIndexVersion(args[1])
			if err != nil {
				return err
			}
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			res, err := cl.DropIndexVersion(cmd.Context(), args[0], v)
			if err != nil {
				return err
			}
			fmt.Printf("index %s version %d: %s\n", res.Index, res.Version, res.State)
			return nil
		},
	}
	cf.register(cmd)
	return cmd
}

// indexQueryFlags are the flags of `index query`.
type indexQueryFlags struct {
	shardValue string
	where      []string
	fields     []string
	columns    []string
	orderBy    string
	limit      int
	cursor     string
	version    int
	all        bool
	asJSON     bool
}

func newIndexQueryCmd() *cobra.Command {
	var cf clientFlags
	var f indexQueryFlags
	cmd := &cobra.Command{
		Use:   "query NAME --shard-value VALUE",
		Short: "Query an index: the entries of one shard field value that match every --where",
		Long: `Query index NAME: the entries whose shard field equals --shard-value (one index shard answers)
and that satisfy every --where, sorted by --order-by (default: row key), one page of --limit
entries (the server's default when 0), or every page with --all.

A --where is FIELD OP VALUE with OP one of = != < <= > >= in; 'in' takes comma-separated values
('destination in LAX,SFO'). A value that reads as a number is sent as a JSON number, true and
false as booleans, anything else as a string; quote it ("...") to send a string anyway
('zip="94107"'). The server types values by the field: datetimes as 2001-01-03,
2001-01-03T10:00:00Z or Unix seconds, UUIDs as strings. NULL values match no condition.

--fields projects the index's fields (default: all); --columns also prints the latest cell of
these columns of each row. The output is a table, or JSON lines with --json (one entry per line).
Without --all, the cursor of the next page is printed on stderr when there is one.`,
		Example: `  schemaless index query flights_by_origin --shard-value LAX --where 'delay>60' --order-by -delay --limit 5
  schemaless index query flights_by_origin --shard-value LAX --where 'date=2001-01-03' --where 'destination in JFK,SFO' --all
  schemaless index query flights_by_origin --shard-value SFO --fields date,delay --columns BASE,STATUS --json --consistency stale`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			return runIndexQuery(cmd.Context(), cl, args[0], f, cf.consistency, os.Stdout, os.Stderr)
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.shardValue, "shard-value", "", "value of the index's shard field (required); typed like a --where value")
	fl.StringArrayVar(&f.where, "where", nil, "condition FIELD OP VALUE (OP: = != < <= > >= in); repeat for several, all must hold")
	fl.StringSliceVar(&f.fields, "fields", nil, "index fields to print (comma-separated; default all)")
	fl.StringSliceVar(&f.columns, "columns", nil, "columns whose latest cell to fetch for each row (comma-separated)")
	fl.StringVar(&f.orderBy, "order-by", "", "sort field: FIELD ascending, -FIELD descending (default: row key)")
	fl.IntVar(&f.limit, "limit", 0, "entries per page (0: the server's default, 100)")
	fl.StringVar(&f.cursor, "cursor", "", "start after this cursor (the next_cursor of a previous page, same --order-by)")
	fl.IntVar(&f.version, "version", 0, "query this index version instead of the alias")
	fl.BoolVar(&f.all, "all", false, "follow next_cursor through every page")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per entry")
	_ = cmd.MarkFlagRequired("shard-value")
	return cmd
}

// runIndexQuery runs f against index name and prints its pages on out (the next cursor on
// errOut).
func runIndexQuery(ctx context.Context, cl *client.Client, name string, f indexQueryFlags, consistency string, out, errOut io.Writer) error {
	q, err := buildIndexQuery(f)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var tw *tabwriter.Writer
	var header []string
	total := 0
	next, err := cl.QueryIndexPages(ctx, name, q, func(res wire.IndexQueryResult) (bool, error) {
		for _, e := range res.Entries {
			total++
			if f.asJSON {
				if err := enc.Encode(e); err != nil {
					return false, err
				}
				continue
			}
			if tw == nil {
				tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				header = queryFieldOrder(f.fields, e.Fields)
				fmt.Fprint(tw, "ROW_KEY")
				for _, h := range header {
					fmt.Fprint(tw, "\t"+h)
				}
				for _, c := range q.Columns {
					fmt.Fprint(tw, "\t"+c)
				}
				fmt.Fprintln(tw)
			}
			fmt.Fprint(tw, e.RowKey)
			for _, h := range header {
				fmt.Fprint(tw, "\t"+renderQueryValue(e.Fields[h]))
			}
			for _, c := range q.Columns {
				cell, ok := e.Cells[c]
				if !ok {
					fmt.Fprint(tw, "\t-")
					continue
				}
				var body bytes.Buffer
				if err := json.Compact(&body, cell.Body); err != nil {
					body.Write(cell.Body)
				}
				fmt.Fprintf(tw, "\t%s", body.Bytes())
			}
			fmt.Fprintln(tw)
		}
		if tw != nil {
			// Flush each page so that --all prints as it goes (columns may differ by page).
			return f.all, tw.Flush()
		}
		return f.all, nil
	}, client.WithConsistency(consistency))
	if err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(errOut, "more entries: --cursor %s\n", next)
	}
	if total == 0 && !f.asJSON {
		fmt.Fprintln(errOut, "no entries")
	}
	return nil
}

// buildIndexQuery turns the flags into the query.
func buildIndexQuery(f indexQueryFlags) (wire.IndexQuery, error) {
	q := wire.IndexQuery{Fields: f.fields, Columns: f.columns, OrderBy: f.orderBy, Limit: f.limit, Cursor: f.cursor, Version: f.version}
	if f.limit < 0 {
		return q, fmt.Errorf("--limit %d: want 0 or more", f.limit)
	}
	if f.version < 0 {
		return q, fmt.Errorf("--version %d: want 1 or more (0: the alias)", f.version)
	}
	q.ShardValue = indexes.ParseScalar(f.shardValue)
	for _, w := range f.where {
		c, err := indexes.ParseCond(w)
		if err != nil {
			return q, fmt.Errorf("--where %q: %w", w, err)
		}
		q.Where = append(q.Where, wire.IndexCond(c))
	}
	return q, nil
}

// queryFieldOrder is the order of the field columns of the table: the --fields order, else the
// answer's field names sorted.
func queryFieldOrder(fields []string, got map[string]any) []string {
	if len(fields) > 0 {
		return fields
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// renderQueryValue prints a field value in a table cell: strings bare, null as NULL.
func renderQueryValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return x
	case json.Number:
		return string(x)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
