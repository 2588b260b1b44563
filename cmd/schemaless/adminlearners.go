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

// newAdminLearnerCmds returns add-learner and remove-learner.
func newAdminLearnerCmds() []*cobra.Command {
	return []*cobra.Command{
		newAdminLearnerCmd("add-learner", "Add a node as a learner (a permanent nonvoter) of a raft partition",
			`Add node --node as a learner of partition --partition of raft datastore --datastore (POST
/v1/admin/partitions/{ds}/{p}/learners): the node opens a replica that receives the log but never
votes, so it adds no latency to writes and no weight to elections. It serves stale reads, reads
bounded in staleness (?consistency=stale&max_staleness=2s: answered only while its last read
index from the leader is that recent) and strong reads (after a read index from the leader):
the replica of a partition in another zone or datacenter. It prints the configuration.

A learner stays one: rebalance and drain never make it a voter (add-voter does). A split's new
partition starts without it (add it to the new partition too).

Errors: 409 the node is a voter, 404 unknown node or datastore, 503 no leader.`,
			func(ctx context.Context, cl *client.Client, ds string, pid int, node string) (wire.PartitionConfig, error) {
				return cl.AddLearner(ctx, ds, pid, node)
			}, "is a learner of"),
		newAdminLearnerCmd("remove-learner", "Remove a learner of a raft partition; its node drops the data",
			`Remove learner --node of partition --partition of raft datastore --datastore (DELETE
/v1/admin/partitions/{ds}/{p}/learners/{node}); the node drops its replica's data. It prints the
configuration. Errors: 409 the node is a voter (remove-voter), 503 no leader.`,
			func(ctx context.Context, cl *client.Client, ds string, pid int, node string) (wire.PartitionConfig, error) {
				return cl.RemoveLearner(ctx, ds, pid, node)
			}, "is no longer a learner of"),
	}
}

func newAdminLearnerCmd(name, short, long string, call func(context.Context, *client.Client, string, int, string) (wire.PartitionConfig, error), done string) *cobra.Command {
	var f adminAPIFlags
	var p partitionFlags
	var node string
	cmd := &cobra.Command{
		Use:   name + " --datastore D --partition P --node N",
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.check(cmd); err != nil {
				return err
			}
			if node == "" {
				return errors.New("--node is required: the learner's node")
			}
			return runAdmin(cmd, &f, func(ctx context.Context, cl *client.Client, out io.Writer) error {
				return runConfigChange(ctx, cl, f.asJSON, out,
					func(ctx context.Context) (wire.PartitionConfig, error) {
						return call(ctx, cl, p.datastore, p.partition, node)
					},
					func(wire.PartitionConfig) string {
						return fmt.Sprintf("%s %s %s/%d", node, done, p.datastore, p.partition)
					})
			})
		},
	}
	f.register(cmd, adminChangeTimeout)
	p.register(cmd)
	cmd.Flags().StringVar(&node, "node", "", "the learner's node (required)")
	return cmd
}
