package jepsen

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Which nodes hold a replica of a raft partition is decided by raft, not by the topology: the
// topology's replica lists only bootstrap the cluster, and the membership nemeses move
// replicas. The checks and the convergence wait read the current placement (every server of
// each partition's raft configuration, voters and nonvoters) from the nodes' admin API, and
// fall back to the topology's lists until it is known.

// RefreshPlacement asks a running node (the others in turn if it fails) for every raft
// partition's configuration (GET /v1/admin/partitions) and records each one's servers for
// ShardReplicas, ReadBack, WaitConverged and WaitApplied. A partition whose configuration is
// unknown (no leader) is an error, and keeps the placement recorded before.
func (c *Cluster) RefreshPlacement(ctx context.Context) error {
	var errs []string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		reps, err := c.partitionReports(ctx, n)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n.ID, err))
			continue
		}
		got := map[string][]string{}
		var unknown []string
		for _, r := range reps {
			if r.Mode != topology.ModeRaft {
				continue
			}
			key := partKey(r.Datastore, r.Partition)
			if r.Error != "" || len(r.Servers) == 0 {
				unknown = append(unknown, fmt.Sprintf("%s (%s)", key, r.Error))
				continue
			}
			ids := make([]string, 0, len(r.Servers))
			for _, s := range r.Servers {
				ids = append(ids, s.Node)
			}
			slices.Sort(ids)
			got[key] = ids
		}
		c.placeMu.Lock()
		if c.placement == nil {
			c.placement = map[string][]string{}
		}
		for k, ids := range got {
			c.placement[k] = ids
		}
		c.placeMu.Unlock()
		if len(unknown) > 0 {
			return fmt.Errorf("jepsen: placement: %s asked: configuration unknown for %s", n.ID, strings.Join(unknown, ", "))
		}
		return nil
	}
	return fmt.Errorf("jepsen: placement: no node answered: %s", strings.Join(errs, "; "))
}

// partitionReports asks node n alone for every partition's report (one attempt, within 10 s).
func (c *Cluster) partitionReports(ctx context.Context, n *Node) ([]wire.PartitionReport, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return n.admin.Partitions(ctx, "")
}

// replicasOf returns the nodes holding a replica of partition p of datastore ds: the current
// placement once RefreshPlacement learned it, the topology's list before.
func (c *Cluster) replicasOf(ds string, p topology.PartitionSpec) []string {
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	if ids, ok := c.placement[partKey(ds, p.ID)]; ok {
		return slices.Clone(ids)
	}
	return slices.Clone(p.Replicas)
}
