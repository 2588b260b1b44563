package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
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
			cl, err := cf.client(cmd.Context())
			if err != nil {
				return err
			}
			st, err := importFlights(cmd.Context(), cl, args[0], airports, f)
			if err != nil {
				return err
			}
			st.Print(os.Stdout, "")
			return nil
		},
	}
	cf.register(flights)
	f.registerTuning(flights)
	flights.Flags().StringVar(&airports, "airports", "testdata/airports.csv", "airports CSV (iata,name,city,state,...) joined into trips")
	cmd.AddCommand(flights)
	return cmd
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
		if n, err := examples.CountFlights(path); err == nil {
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
