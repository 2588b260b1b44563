package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
)

// RestoreOptions shape a Restore.
type RestoreOptions struct {
	// Datastore is the datastore to restore into; "" means the backup's.
	Datastore string
	// Force replaces partitions that hold cells; without it a target holding any cell is
	// refused (a *NotEmptyError) before anything is restored.
	Force bool
}

// Restore restores the backup in dir into a datastore of the cluster cl talks to, partition by
// partition (client.Restore), and returns the backup's manifest. Before touching the cluster it
// reads the manifest, verifies every file against it (Verify), checks that the target is a raft
// datastore with the backup's shard count and partitions (ids and shard ranges) and, without
// opts.Force, that no shard of it holds a cell. Each partition's whole state is replaced on
// every replica; the call returns once a quorum of each holds it, or ctx is done.
//
// Errors: the manifest's, the first mismatch Verify finds, a target of another layout, a
// *NotEmptyError (ErrTargetNotEmpty), the client's (wrapped with the partition: a partition
// that fails leaves those before it restored and the others as they were), or a partition
// whose restore counts differ from the manifest's.
func Restore(ctx context.Context, cl *client.Client, dir string, opts RestoreOptions) (Manifest, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Manifest{}, err
	}
	if err := Verify(dir, m); err != nil {
		return Manifest{}, fmt.Errorf("the backup in %s does not check out, nothing restored: %w", dir, err)
	}
	ds := opts.Datastore
	if ds == "" {
		ds = m.Datastore
	}
	spec, err := clusterDatastore(ctx, cl, ds)
	if err != nil {
		return Manifest{}, err
	}
	if err := sameLayout(m, spec); err != nil {
		return Manifest{}, fmt.Errorf("nothing restored: %w", err)
	}
	if !opts.Force {
		if err := checkTargetEmpty(ctx, cl.WithDatastore(spec.Name), spec); err != nil {
			return Manifest{}, err
		}
	}
	for _, mp := range m.Partitions {
		res, err := restorePartition(ctx, cl, ds, dir, mp, opts.Force)
		if err != nil {
			return Manifest{}, fmt.Errorf("partition %d: %w", mp.ID, err)
		}
		if res.Cells != mp.Cells || res.KVRows != mp.KVRows || res.IndexEntries != mp.IndexEntries || res.AppliedIndex != mp.AppliedIndex {
			return Manifest{}, fmt.Errorf("partition %d: the cluster restored %d cells, %d KV rows, %d index entries of index %d; the manifest says %d, %d, %d of %d",
				mp.ID, res.Cells, res.KVRows, res.IndexEntries, res.AppliedIndex, mp.Cells, mp.KVRows, mp.IndexEntries, mp.AppliedIndex)
		}
	}
	return m, nil
}

// sameLayout checks that the target datastore has the backup's shards and partitions.
func sameLayout(m Manifest, spec wire.DatastoreStatus) error {
	if spec.Mode != topology.ModeRaft {
		return fmt.Errorf("datastore %s is in mode %s: restores go into raft datastores", spec.Name, spec.Mode)
	}
	if spec.Shards != m.Shards {
		return fmt.Errorf("datastore %s has %d shards, the backup %d: a backup restores only into the same shard count", spec.Name, spec.Shards, m.Shards)
	}
	if len(spec.Partitions) != len(m.Partitions) {
		return fmt.Errorf("datastore %s has %d partitions, the backup %d", spec.Name, len(spec.Partitions), len(m.Partitions))
	}
	for i, p := range spec.Partitions {
		b := m.Partitions[i]
		if p.ID != b.ID || p.FirstShard != b.FirstShard || p.LastShard != b.LastShard {
			return fmt.Errorf("datastore %s partition %d holds shards %d..%d, the backup's partition %d holds %d..%d",
				spec.Name, p.ID, p.FirstShard, p.LastShard, b.ID, b.FirstShard, b.LastShard)
		}
	}
	return nil
}

// checkTargetEmpty refuses a target datastore a shard of which holds a cell. cl addresses the
// target datastore.
func checkTargetEmpty(ctx context.Context, cl *client.Client, spec wire.DatastoreStatus) error {
	var full []int
	for _, p := range spec.Partitions {
		for s := p.FirstShard; s <= p.LastShard; s++ {
			page, err := cl.ShardCells(ctx, s, 0, 1)
			if err != nil {
				return fmt.Errorf("checking that shard %d is empty: %w", s, err)
			}
			if len(page.Cells) > 0 || page.HighWater > 0 {
				full = append(full, p.ID)
				break
			}
		}
	}
	if len(full) > 0 {
		return &NotEmptyError{Datastore: spec.Name, Partitions: full}
	}
	return nil
}

// restorePartition sends mp's file to the cluster.
func restorePartition(ctx context.Context, cl *client.Client, ds, dir string, mp Partition, force bool) (wire.RestoreResult, error) {
	f, err := os.Open(filepath.Join(dir, mp.File))
	if err != nil {
		return wire.RestoreResult{}, err
	}
	defer f.Close()
	return cl.Restore(ctx, ds, mp.ID, f, mp.Bytes, client.RestoreOptions{Force: force})
}
