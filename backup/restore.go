package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// RestoreOptions shape a Restore. A partition's cells are compared with its backup's by key
// (shard, row key, column key, ref key): a partition's CellsLost counts its cells the backup
// lacks (written after the backup, for one), which a restore drops.
type RestoreOptions struct {
	// Datastore is the datastore to restore into; "" means the backup's.
	Datastore string
	// DryRun sends every partition's file as a dry run (?dry_run=true) and reports, per
	// partition and in total, the cells the target holds and those a restore would drop;
	// nothing is changed.
	DryRun bool
	// Force replaces partitions that hold cells when every one of those cells is in the
	// backup (a total CellsLost of 0); without it (and without AcceptLostCells) a target
	// holding any cell is refused (a *NotEmptyError) before anything is restored. It never
	// drops cells: a target whose total CellsLost is not 0 is refused (a *CellsLostError)
	// unless AcceptLostCells names it.
	Force bool
	// AcceptLostCells, when not nil, is the total CellsLost (over every partition) the caller
	// accepts, as a dry run reported it. Restore first dry-runs every partition; unless the
	// total equals it, it refuses (a *CellsLostError) and restores nothing. Each partition is
	// then restored accepting exactly its own count from that dry run, so a partition written
	// to in between is refused by its node (client.ErrConflict) rather than losing more. It
	// allows replacing partitions that hold cells, as Force does.
	AcceptLostCells *int64
}

// Report says what Restore did or, with DryRun, would do: per partition (in the manifest's
// order) the cells the target held and those of them absent from the backup, and the totals.
type Report struct {
	// Datastore is the target datastore.
	Datastore string `json:"datastore"`
	// DryRun is true when nothing was changed.
	DryRun bool `json:"dry_run"`
	// Partitions has one entry per partition compared or restored (none when the target
	// was empty and no comparison was needed: an empty target loses nothing).
	Partitions []PartitionReport `json:"partitions"`
	// TargetCells and CellsLost are the sums over Partitions.
	TargetCells int64 `json:"target_cells"`
	CellsLost   int64 `json:"cells_lost"`
}

// PartitionReport is one partition of a Report: the cells of the backup, those the target
// held, and those of the target absent from the backup (wire.RestoreResult).
type PartitionReport struct {
	ID          int   `json:"id"`
	BackupCells int64 `json:"backup_cells"`
	TargetCells int64 `json:"target_cells"`
	CellsLost   int64 `json:"cells_lost"`
}

func (r *Report) add(id int, res wire.RestoreResult) {
	r.Partitions = append(r.Partitions, PartitionReport{ID: id, BackupCells: res.Cells, TargetCells: res.TargetCells, CellsLost: res.CellsLost})
	r.TargetCells += res.TargetCells
	r.CellsLost += res.CellsLost
}

// Restore restores the backup in dir into a datastore of the cluster cl talks to, partition by
// partition (client.Restore), and returns the backup's manifest with a Report of the cells the
// target held and those dropped. Before touching the cluster it reads the manifest, verifies
// every file against it (Verify), checks that the target is a raft datastore with the
// backup's shard count and partitions (ids and shard ranges) and, without opts.Force or
// opts.AcceptLostCells, that no shard of it holds a cell. With opts.Force or
// opts.AcceptLostCells it then dry-runs every partition and refuses, restoring nothing, unless
// the total of cells lost is opts.AcceptLostCells (0 when only Force is given). Each
// partition's whole state is then replaced on every replica; the call returns once a quorum of
// each holds it, or ctx is done. With opts.DryRun it stops after the dry runs, changing
// nothing, and reports them.
//
// Errors: the manifest's, the first mismatch Verify finds, a target of another layout, a
// *NotEmptyError (ErrTargetNotEmpty), a *CellsLostError (ErrCellsLost), the client's (wrapped
// with the partition: a partition that fails leaves those before it restored and the others
// as they were), or a partition whose restore counts differ from the manifest's.
func Restore(ctx context.Context, cl *client.Client, dir string, opts RestoreOptions) (Manifest, Report, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return Manifest{}, Report{}, err
	}
	if opts.AcceptLostCells != nil && *opts.AcceptLostCells < 0 {
		return Manifest{}, Report{}, fmt.Errorf("backup: accept lost cells %d is negative", *opts.AcceptLostCells)
	}
	if err := Verify(dir, m); err != nil {
		return Manifest{}, Report{}, fmt.Errorf("the backup in %s does not check out, nothing restored: %w", dir, err)
	}
	ds := opts.Datastore
	if ds == "" {
		ds = m.Datastore
	}
	rep := Report{Datastore: ds, DryRun: opts.DryRun}
	spec, err := clusterDatastore(ctx, cl, ds)
	if err != nil {
		return Manifest{}, rep, err
	}
	if err := sameLayout(m, spec); err != nil {
		return Manifest{}, rep, fmt.Errorf("nothing restored: %w", err)
	}
	if !opts.Force && opts.AcceptLostCells == nil && !opts.DryRun {
		if err := checkTargetEmpty(ctx, cl.WithDatastore(spec.Name), spec); err != nil {
			return Manifest{}, rep, err
		}
	}
	var accept []*int64 // per partition, the count each restore accepts (nil: an empty target)
	if opts.DryRun || opts.Force || opts.AcceptLostCells != nil {
		rep.DryRun = true // the dry runs' report, until the restores
		for _, mp := range m.Partitions {
			res, err := restorePartition(ctx, cl, ds, dir, mp, client.RestoreOptions{DryRun: true})
			if err != nil {
				return Manifest{}, rep, fmt.Errorf("partition %d: dry run, nothing restored: %w", mp.ID, err)
			}
			rep.add(mp.ID, res)
			accept = append(accept, &res.CellsLost)
		}
		if opts.DryRun {
			return m, rep, nil
		}
		want := int64(0)
		if opts.AcceptLostCells != nil {
			want = *opts.AcceptLostCells
		}
		if rep.CellsLost != want {
			return Manifest{}, rep, &CellsLostError{Datastore: ds, Report: rep, Accepted: opts.AcceptLostCells}
		}
		rep = Report{Datastore: ds}
	}
	for i, mp := range m.Partitions {
		var ro client.RestoreOptions
		if accept != nil {
			ro.AcceptLostCells = accept[i]
		}
		res, err := restorePartition(ctx, cl, ds, dir, mp, ro)
		if err != nil {
			return Manifest{}, rep, fmt.Errorf("partition %d: %w", mp.ID, err)
		}
		if res.Cells != mp.Cells || res.KVRows != mp.KVRows || res.IndexEntries != mp.IndexEntries || res.AppliedIndex != mp.AppliedIndex {
			return Manifest{}, rep, fmt.Errorf("partition %d: the cluster restored %d cells, %d KV rows, %d index entries of index %d; the manifest says %d, %d, %d of %d",
				mp.ID, res.Cells, res.KVRows, res.IndexEntries, res.AppliedIndex, mp.Cells, mp.KVRows, mp.IndexEntries, mp.AppliedIndex)
		}
		rep.add(mp.ID, res)
	}
	return m, rep, nil
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
func restorePartition(ctx context.Context, cl *client.Client, ds, dir string, mp Partition, opts client.RestoreOptions) (wire.RestoreResult, error) {
	f, err := os.Open(filepath.Join(dir, mp.File))
	if err != nil {
		return wire.RestoreResult{}, err
	}
	defer f.Close()
	return cl.Restore(ctx, ds, mp.ID, f, mp.Bytes, opts)
}
