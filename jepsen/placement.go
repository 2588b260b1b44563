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

// Which partitions a raft datastore has is decided by the cluster's catalog, not by the
// topology file: the split nemesis splits partitions, so their number grows during a run. And
// which nodes hold a replica of a raft partition is decided by raft: the topology's replica
// lists only bootstrap the cluster, and the membership nemeses move replicas. The checks and
// the convergence wait read both from the nodes' admin API: the partition map (GET
// /v1/admin/datastores, kept in Cluster.Topology) and the current placement (every server of
// each partition's raft configuration, voters and nonvoters), and fall back to the topology
// file until they are known.

// RefreshPlacement learns the datastores' partition map from the cluster's catalog
// (refreshPartitions: every running node asked, the newest catalog kept), then asks a running
// node (the others in turn if it fails) for every raft partition's configuration (GET
// /v1/admin/partitions) and records each one's servers for ShardReplicas, ReadBack,
// WaitConverged and WaitApplied. No node answering the catalog is an error; so is a partition
// whose configuration is unknown (no leader), which keeps the placement recorded before.
func (c *Cluster) RefreshPlacement(ctx context.Context) error {
	if err := c.refreshPartitions(ctx); err != nil {
		return err
	}
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

// refreshPartitions asks every running node for the cluster's catalog (GET
// /v1/admin/datastores, one attempt each, within 10 s) and, when the newest answer is newer
// than the catalog Topology holds, stores a new Topology whose datastores have its
// partitions (withCatalog). A node's catalog can lag behind the others', so every node is
// asked: the checks must not miss a partition a split made. It is an error when no node
// answers or the newest answer is not a partition map of the topology's datastores (the
// Topology is then left as it was).
func (c *Cluster) refreshPartitions(ctx context.Context) error {
	var best *wire.DatastoresResponse
	var errs []string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cat, err := n.admin.Datastores(qctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", n.ID, err))
			continue
		}
		if best == nil || cat.Generation > best.Generation {
			best = &cat
		}
	}
	if best == nil {
		return fmt.Errorf("jepsen: partition map: no node answered: %s", strings.Join(errs, "; "))
	}
	return c.learnCatalog(*best)
}

// learnCatalog stores a new Topology with cat's partition map (withCatalog) when cat is newer
// than the catalog the Topology holds; an older or the same generation changes nothing, so the
// map never goes back to an older catalog. Safe for concurrent use with Topology's readers.
func (c *Cluster) learnCatalog(cat wire.DatastoresResponse) error {
	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	if c.catalogKnown && cat.Generation <= c.catalogGen {
		return nil
	}
	top, err := withCatalog(c.top.Load(), cat.Datastores)
	if err != nil {
		return fmt.Errorf("jepsen: partition map of catalog generation %d: %w", cat.Generation, err)
	}
	c.top.Store(top)
	c.catalogGen, c.catalogKnown = cat.Generation, true
	return nil
}

// withCatalog returns a copy of top whose datastores have the partitions the catalog lists for
// them (ID, FirstShard, LastShard, and Replicas for raft, Cluster for async ones), sorted by
// first shard. top is not modified; the copy shares the nodes with it and has new partition
// lists. A datastore of top missing from the catalog, an async partition without a storage
// cluster, or partitions that do not cover the datastore's shards 0..Shards-1 exactly once in
// contiguous ranges, is an error.
func withCatalog(top *topology.Topology, catalog []wire.DatastoreInfo) (*topology.Topology, error) {
	byName := map[string]wire.DatastoreInfo{}
	for _, d := range catalog {
		byName[d.Name] = d
	}
	out := *top
	out.Datastores = slices.Clone(top.Datastores)
	for i, d := range out.Datastores {
		info, ok := byName[d.Name]
		if !ok {
			return nil, fmt.Errorf("%s datastore %s is not in the catalog", d.Mode, d.Name)
		}
		parts := make([]topology.PartitionSpec, 0, len(info.Partitions))
		for _, p := range info.Partitions {
			if d.Mode == topology.ModeAsync && p.Cluster == "" {
				return nil, fmt.Errorf("async datastore %s: partition %d names no storage cluster", d.Name, p.ID)
			}
			parts = append(parts, topology.PartitionSpec{ID: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard,
				Replicas: slices.Clone(p.Replicas), Cluster: p.Cluster})
		}
		slices.SortFunc(parts, func(a, b topology.PartitionSpec) int { return a.FirstShard - b.FirstShard })
		next := 0
		for _, p := range parts {
			if p.FirstShard != next || p.LastShard < p.FirstShard {
				return nil, fmt.Errorf("datastore %s: partition %d holds shards %d..%d, want it to start at %d", d.Name, p.ID, p.FirstShard, p.LastShard, next)
			}
			next = p.LastShard + 1
		}
		if next != d.Shards {
			return nil, fmt.Errorf("datastore %s: the partitions hold shards 0..%d, want 0..%d", d.Name, next-1, d.Shards-1)
		}
		out.Datastores[i].Partitions = parts
	}
	return &out, nil
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
