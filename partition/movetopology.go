package partition

import (
	"context"
	"errors"
	"fmt"

	"github.com/schemaless-db/schemaless/topology"
)

// AsyncMove describes a move of one partition of an async datastore to another of its storage
// clusters (MoveAsync).
type AsyncMove struct {
	// Datastore is the async datastore, from the topology the nodes run.
	Datastore *topology.DatastoreSpec
	// Partition is the partition's id.
	Partition int
	// To names the target storage cluster, one of Datastore.StorageClusters (a spare cluster
	// holding no partition is fine).
	To string
	// DSN maps each member's DSN of the topology to the DSN to connect with (the admin command
	// replaces the user). nil: the topology's DSNs, whose user may write the masters.
	DSN func(dsn string) (string, error)
	// Cluster carries the storage clusters' tunables (probe interval, breakers); identity
	// fields are filled in.
	Cluster ClusterConfig
	// Move carries the move's tunables (lock wait, catch-up, drain, drop, logger); identity
	// fields are filled in.
	Move MoveConfig
}

// MoveAsync moves a partition of an async datastore to storage cluster m.To while the
// nodes keep serving it (MovePartition: copy, catch up from the shard logs, switch
// under the partition's lock, drain). It connects to the storage clusters' members directly,
// needs no node, and blocks until done or ctx ends. The nodes pick the new placement up by
// themselves; the topology file may be updated afterwards (partitions[].cluster), and must
// list To among storage_clusters. Errors: a bad AsyncMove, MovePartition's.
func MoveAsync(ctx context.Context, m AsyncMove) (MoveResult, error) {
	ds := m.Datastore
	if ds == nil || ds.Mode != topology.ModeAsync {
		return MoveResult{}, errors.New("partition: move: the datastore must be in mode async")
	}
	ps := ds.PartitionByID(m.Partition)
	if ps == nil {
		return MoveResult{}, fmt.Errorf("partition: move: datastore %s has no partition %d", ds.Name, m.Partition)
	}
	if _, ok := ds.StorageCluster(m.To); !ok {
		return MoveResult{}, fmt.Errorf("partition: move: datastore %s has no storage cluster %q", ds.Name, m.To)
	}
	clusters, err := openSpecClusters(ds, m.Cluster, m.DSN)
	if err != nil {
		return MoveResult{}, fmt.Errorf("partition: move: %w", err)
	}
	defer closeClusters(clusters)
	mc := m.Move
	mc.Datastore, mc.Partition, mc.Shards = ds.Name, ps.ID, ps.Shards()
	mc.Clusters, mc.Static, mc.To = clusters, ps.Cluster, m.To
	return MovePartition(ctx, mc)
}

// openSpecClusters opens every storage cluster of async datastore ds with the tunables of cc,
// each member's DSN mapped by dsn when not nil. The caller closes them (closeClusters).
func openSpecClusters(ds *topology.DatastoreSpec, cc ClusterConfig, dsn func(string) (string, error)) ([]*StorageCluster, error) {
	var clusters []*StorageCluster
	for _, cs := range ds.StorageClusters {
		c := cc
		c.Name, c.Prefix, c.Members = cs.Name, ds.MySQLPrefix, nil
		for _, m := range cs.Members() {
			if dsn != nil {
				var err error
				if m, err = dsn(m); err != nil {
					closeClusters(clusters)
					return nil, fmt.Errorf("storage cluster %s: %w", cs.Name, err)
				}
			}
			c.Members = append(c.Members, m)
		}
		sc, err := OpenCluster(c)
		if err != nil {
			closeClusters(clusters)
			return nil, err
		}
		clusters = append(clusters, sc)
	}
	return clusters, nil
}

func closeClusters(cs []*StorageCluster) {
	for _, c := range cs {
		_ = c.Close()
	}
}
