package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/workload"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// importFlags tune an import.
type importFlags struct {
	batch       int
	concurrency int
	limit       int
	quiet       bool
}

func (f *importFlags) registerTuning(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.batch, "batch", 500, "cells per put_cells request")
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 8, "put_cells requests in flight")
	cmd.Flags().IntVar(&f.limit, "limit", 0, "import at most this many flights (0: all)")
	cmd.Flags().BoolVar(&f.quiet, "quiet", false, "no progress bar")
}

func newImportCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Import data through the HTTP API"}
	var cf clientFlags
	var f importFlags
	var airports string
	flights := &cobra.Command{
		Use:   "flights FILE",
		Short: "Import a flights CSV (.csv or .csv.gz) as trips: one BASE cell per flight",
		Long: `Import a flights CSV (date,delay,distance,origin,destination; see testdata/README.md) as trips:
each flight becomes a BASE cell (ref key 1) of a row key derived from the flight and its line number,
so importing the same file again changes nothing (every cell answers "exists").`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := cf.client()
			if err != nil {
				return err
			}
			st, err := importFlights(cmd.Context(), cl, args[0], airports, f)
			if err != nil {
				return err
			}
			printImportStats("", st)
			return nil
		},
	}
	cf.register(flights)
	f.registerTuning(flights)
	flights.Flags().StringVar(&airports, "airports", "testdata/airports.csv", "airports CSV (iata,name,city,state,...) joined into trips")
	cmd.AddCommand(flights)
	return cmd
}

// printImportStats prints the figures of an import, each line after prefix.
func printImportStats(prefix string, s examples.ImportStats) {
	fmt.Printf("%simported %d flights in %.1fs: %.0f cells/s (%d created, %d exists, %d conflicts)\n",
		prefix, s.Flights, s.Elapsed.Seconds(), float64(s.Flights)/s.Elapsed.Seconds(), s.Created, s.Exists, s.Conflicts)
	if s.Buffered > 0 {
		fmt.Printf("%s%d flights were buffered (async mode, a primary master was down): durable, readable once replayed\n", prefix, s.Buffered)
	}
	if s.UnknownAirports > 0 {
		fmt.Printf("%s  %d airport codes were not in the airports file (empty city and state)\n", prefix, s.UnknownAirports)
	}
}

// importFlights sends the flights of path in batches, f.concurrency requests at a time
// (examples.Import), with a progress bar on stderr unless f.quiet.
func importFlights(ctx context.Context, cl *client.Client, path, airportsPath string, f importFlags) (examples.ImportStats, error) {
	if f.batch < 1 || f.concurrency < 1 {
		return examples.ImportStats{}, errors.New("--batch and --concurrency must be positive")
	}
	r, airports, closeFile, err := examples.OpenFlights(path, airportsPath)
	if err != nil {
		return examples.ImportStats{}, err
	}
	defer closeFile()
	opts := examples.ImportOptions{Batch: f.batch, Concurrency: f.concurrency, Limit: f.limit}
	var bar *progressbar.ProgressBar
	if !f.quiet {
		max := int64(-1)
		if n, err := countFlights(path); err == nil {
			max = int64(n)
		}
		if f.limit > 0 && (max < 0 || int64(f.limit) < max) {
			max = int64(f.limit)
		}
		bar = progressbar.NewOptions64(max, progressbar.OptionSetDescription("importing flights"),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("cells"),
			progressbar.OptionSetWriter(os.Stderr), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
		opts.Progress = func(n int) { _ = bar.Add(n) }
	}
	st, err := examples.Import(ctx, cl, r, airports, opts)
	if bar != nil {
		_ = bar.Finish()
	}
	return st, err
}

// verifyFlights reads every flight of path back with batch gets and checks each body. It
// returns the number of cells read and checked.
func verifyFlights(ctx context.Context, cl *client.Client, path, airportsPath string, limit, batch int, consistency string) (int, error) {
	r, airports, closeFile, err := examples.OpenFlights(path, airportsPath)
	if err != nil {
		return 0, err
	}
	defer closeFile()
	n := 0
	_, err = workload.Import(ctx, r, airports, batch, limit, func(ctx context.Context, b []workload.Trip) error {
		keys := make([]client.GetKey, len(b))
		want := map[string][]byte{}
		for i, t := range b {
			keys[i] = client.GetKey{RowKey: t.RowKey, ColumnKey: t.ColumnKey, RefKey: t.RefKey}
			want[t.RowKey.String()] = t.Body
		}
		resp, err := cl.GetCells(ctx, keys, client.WithConsistency(consistency))
		if err != nil {
			return err
		}
		if len(resp.Missing) > 0 {
			return fmt.Errorf("read back: %d of %d cells missing, first %s/%s", len(resp.Missing), len(b), resp.Missing[0].RowKey, resp.Missing[0].ColumnKey)
		}
		for _, c := range resp.Cells {
			if err := examples.SameJSON(c.Body, want[c.RowKey]); err != nil {
				return fmt.Errorf("read back %s: %w", c.RowKey, err)
			}
			n++
		}
		return nil
	}, nil)
	return n, err
}

// devImport imports f.importPath (at most opts.limit flights) through cl, into its datastore,
// and reads it all back, strong then stale, printing each line after prefix ("" for trips). A
// stale read-back that misses cells is tried again every 200 ms for up to staleWait (0: once),
// since replicas may trail. onImported, when not nil, is called between the import and the
// read-back.
func devImport(ctx context.Context, cl *client.Client, f devFlags, opts importFlags, prefix string, staleWait time.Duration, onImported func()) error {
	st, err := importFlights(ctx, cl, f.importPath, f.airports, opts)
	if err != nil {
		return fmt.Errorf("%simport: %w", prefix, err)
	}
	if onImported != nil {
		onImported()
	}
	printImportStats(prefix, st)
	for _, c := range []string{client.ConsistencyStrong, client.ConsistencyStale} {
		first, start := time.Now(), time.Now()
		n, err := verifyFlights(ctx, cl, f.importPath, f.airports, opts.limit, 200, c)
		attempts := 1
		for ; err != nil && c == client.ConsistencyStale && time.Since(first) < staleWait && ctx.Err() == nil; attempts++ {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			start = time.Now()
			n, err = verifyFlights(ctx, cl, f.importPath, f.airports, opts.limit, 200, c)
		}
		if err != nil && c == client.ConsistencyStrong {
			return fmt.Errorf("%sverify: %w", prefix, err)
		}
		if err != nil {
			// A stale read may trail the leader (or the master) by a few entries.
			fmt.Printf("%sread back (%s): %v\n", prefix, c, err)
			continue
		}
		el, lag := time.Since(start), ""
		if attempts > 1 {
			plural := "s"
			if attempts == 2 {
				plural = ""
			}
			lag = fmt.Sprintf(" (%d earlier attempt%s in %.1fs found replicas behind)", attempts-1, plural, start.Sub(first).Seconds())
		}
		fmt.Printf("%sread back %d cells (%s) in %.1fs: %.0f cells/s, every body as written%s\n", prefix, n, c, el.Seconds(), float64(n)/el.Seconds(), lag)
	}
	return nil
}

// countFlights counts the data lines of a flights file (plain or gzip-compressed CSV), for the
// progress bar's total. It reads the whole file once more (0.4 s for the 3 million flights of
// the shared dataset).
func countFlights(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer gz.Close()
		r = gz
	}
	buf := make([]byte, 1<<16)
	lines, last := 0, byte('\n')
	for {
		n, err := r.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if n > 0 {
			last = buf[n-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		lines++ // a last line without a newline
	}
	return max(lines-1, 0), nil // minus the header
}
