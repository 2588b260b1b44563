package main

import (
	"errors"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/schemaless-db/schemaless/bench"
	"github.com/schemaless-db/schemaless/client"
)

// newBenchPeeringCmd is `bench peering`: replication between two running clusters.
func newBenchPeeringCmd() *cobra.Command {
	var a, b []string
	var cfg bench.PeeringConfig
	cfg.Latency = bench.PeerLatencyConfig{AName: "east", BName: "west", Shards: 64, Rate: 1000, Duration: 30 * time.Second}
	cmd := &cobra.Command{
		Use:   "peering --a URL,... --b URL,...",
		Short: "Measure replication between two clusters: end-to-end latency both ways, one stream's throughput",
		Long: `Against two running clusters that replicate datastore trips both ways (schemaless dev
--clusters 2 --peer-delay 40ms starts such a pair), measure:

  latency     --rate cells per second written into each cluster for --duration (put_cells of
              --batch cells); each cell's time from its acknowledgement at its origin to its
              arrival in the other cluster's shard log, read by a long-polling tail of every
              shard; p50, p90, p99, max per direction, cells lost, cells out of origin order
  throughput  the stream from --a to --b: the peer is dropped, --backlog cells are written into
              --a, the peer is set again with the settings it had, and the time until the
              stream's lag is 0 gives cells per second

Each phase prints the CPU seconds of this process and of --cpu-pid processes (the nodes).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(a) == 0 || len(b) == 0 {
				return errors.New("--a and --b are required: the two clusters' endpoints")
			}
			for _, side := range []struct {
				eps []string
				to  **client.Client
			}{{a, &cfg.Latency.A}, {b, &cfg.Latency.B}} {
				cc := client.DefaultConfig()
				cc.Endpoints, cc.Datastore = side.eps, "trips"
				cl, err := client.New(cc)
				if err != nil {
					return err
				}
				*side.to = cl
			}
			return bench.RunPeering(cmd.Context(), cfg, os.Stdout)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&a, "a", nil, "endpoints of the first cluster")
	fl.StringSliceVar(&b, "b", nil, "endpoints of the second cluster")
	fl.StringVar(&cfg.Latency.AName, "a-name", cfg.Latency.AName, "the first cluster's name")
	fl.StringVar(&cfg.Latency.BName, "b-name", cfg.Latency.BName, "the second cluster's name")
	fl.IntVar(&cfg.Latency.Shards, "shards", cfg.Latency.Shards, "shards of trips")
	fl.IntVar(&cfg.Latency.Rate, "rate", cfg.Latency.Rate, "cells per second written into each cluster")
	fl.DurationVar(&cfg.Latency.Duration, "duration", cfg.Latency.Duration, "how long the latency phase writes")
	fl.IntVar(&cfg.Latency.Batch, "batch", 1, "cells per put_cells in the latency phase (--rate stays cells per second)")
	fl.IntVar(&cfg.Backlog, "backlog", 50000, "cells of the throughput phase (0: skip it)")
	fl.IntSliceVar(&cfg.CPUPIDs, "cpu-pid", nil, "node processes whose CPU to report")
	return cmd
}
