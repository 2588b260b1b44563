package main

import (
	"os"

	"github.com/schemaless-db/schemaless/bench/plot"
	"github.com/spf13/cobra"
)

// newBenchPlotCmd is `schemaless bench plot`: its flags fill a plot.Config, which plot.Run
// draws.
func newBenchPlotCmd() *cobra.Command {
	p := plot.DefaultConfig()
	cmd := &cobra.Command{
		Use:   "plot",
		Short: "Plot results of schemaless bench --json",
		Long: `Draw one line chart of results of 'schemaless bench --json' (one JSON object per line, as it
prints them; lines that are not such an object, or have no target or workload, are ignored).

Each result of the --in files gives a point (x, y) of its series, one series per target,
workload and consistency (and per --y metric when there are several; and per rate when --x is
not rate and the result has one: open-loop runs). Points of a series with the same x are
averaged, and joined by a line in x order.

--x (the x axis):
  clients       the result's clients (for most workloads, requests in flight)
  stored_cells  the cells stored during the run (scale-cells)
  partitions    the result's "partitions" if it has one, else the file name's tag p<N>
  rate          the result's "rate" (that of its triggers, index or replication_lag figures if
                it has none), else the file name's tag r<N>
  A tag is a part of the file name before its first dot, between dashes or underscores:
  put-p16.jsonl gives partitions 16, sqlite_p4-r500.json partitions 4 and rate 500. So a sweep
  over a setting that results do not record writes one file per value, named after it.
  Results without an x value are skipped (their count goes to stderr).

--y (the y axis; several metrics of one unit may share a plot, drawn dashed in --y order):
  cells_per_sec  cells/s
  ops_per_sec    requests/s
  p50, p90, p99, max
                 latency in ms (results without latency figures, as 0, are skipped)

--out's extension picks the format: .svg (960x540 pt) or .png (1600x900 px).

Examples:
  schemaless bench plot --in clients.jsonl --x clients --y cells_per_sec --log-x --out put.svg
  schemaless bench plot --in put-p1.jsonl,put-p2.jsonl --x partitions --y cells_per_sec --out parts.png
  schemaless bench plot --in scale.jsonl --x stored_cells --y p50,p99 --log-x \
      --workload 'scale-cells put,scale-cells get' --out latency.svg`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return plot.Run(p, os.Stderr) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&p.In, "in", p.In, "files of bench --json results, comma-separated or repeated")
	fl.StringVar(&p.X, "x", p.X, "x axis: "+plot.XAxes())
	fl.StringSliceVar(&p.Y, "y", p.Y, "y axis, comma-separated metrics of one unit: "+plot.YAxes())
	fl.StringVar(&p.Out, "out", p.Out, "file to write, created or truncated: FILE.svg or FILE.png")
	fl.StringVar(&p.Title, "title", p.Title, "title of the plot (default: \"<y> vs <x>\")")
	fl.BoolVar(&p.LogX, "log-x", p.LogX, "logarithmic x axis (points with x <= 0 are left out)")
	fl.BoolVar(&p.LogY, "log-y", p.LogY, "logarithmic y axis (points with y <= 0 are left out)")
	fl.StringSliceVar(&p.Targets, "target", p.Targets, "plot only results of these targets, comma-separated (default all)")
	fl.StringSliceVar(&p.Workloads, "workload", p.Workloads, "plot only results of these workloads (as in the results: \"scale-cells get\"), comma-separated (default all)")
	return cmd
}
