package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

func newAdminDatastoreSettingsCmd() *cobra.Command {
	var f adminAPIFlags
	var name, leaderZone string
	var splitLoad float64
	var splitSize int64
	cmd := &cobra.Command{
		Use:   "datastore-settings --name N [--leader-zone Z] [--split-load R] [--split-size BYTES]",
		Short: "Change a raft datastore's leader zone and split thresholds at run time",
		Long: `Change the settings of raft datastore --name in the cluster's replicated catalog (PATCH
/v1/admin/datastores/{name}); every node serves the datastore with them once it has applied the
change. Only the flags given change:

  --leader-zone  the zone whose nodes should lead its partitions ("" clears it): 'schemaless
                 admin rebalance' moves leaderships there, and the cluster's own transfers
                 (after a split) keep them there when a voter of the zone is alive
  --split-load   requests per second above which a partition splits on its own (0: the nodes'
                 serve --split-load; negative: never by load)
  --split-size   bytes on disk above which a partition splits on its own (0: the nodes'
                 serve --split-size; negative: never by size)

It prints the datastore's settings after the change. Two changes at once: the later one's
settings win whole.

Errors: 400 naming the field (a zone name that is not [a-z0-9][a-z0-9_.-]{0,63}, no flag given,
an async datastore), 404 no such datastore, 503 the catalog has no leader.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" {
				return errors.New("--name is required: the datastore to change")
			}
			var req wire.DatastoreSettingsRequest
			if cmd.Flags().Changed("leader-zone") {
				req.LeaderZone = &leaderZone
			}
			if cmd.Flags().Changed("split-load") {
				req.SplitLoad = &splitLoad
			}
			if cmd.Flags().Changed("split-size") {
				req.SplitSize = &splitSize
			}
			if req.LeaderZone == nil && req.SplitLoad == nil && req.SplitSize == nil {
				return errors.New("give --leader-zone, --split-load or --split-size: nothing to change")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				res, err := cl.SetDatastoreSettings(ctx, name, req)
				if err != nil {
					return adminError(err)
				}
				if f.asJSON {
					return writeAnswerJSON(out, res)
				}
				d := res.Datastore
				fmt.Fprintf(out, "datastore %s at catalog generation %d: leader zone %s, split load %s, split size %s\n", name, res.Generation,
					orNone(d.LeaderZone), threshold(d.SplitLoad, "requests/s"), threshold(float64(d.SplitSize), "bytes"))
				return nil
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "the datastore to change (required)")
	fl.StringVar(&leaderZone, "leader-zone", "", `its leader zone ("" clears it)`)
	fl.Float64Var(&splitLoad, "split-load", 0, "its load-based split threshold, requests per second (0: the nodes'; negative: off)")
	fl.Int64Var(&splitSize, "split-size", 0, "its size-based split threshold, bytes (0: the nodes'; negative: off)")
	return cmd
}

// orNone is s, or "none" when it is empty.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// threshold renders a datastore's split threshold v in unit: 0 the nodes', negative off.
func threshold(v float64, unit string) string {
	switch {
	case v == 0:
		return "the nodes'"
	case v < 0:
		return "off"
	}
	return fmt.Sprintf("%g %s", v, unit)
}
