package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/partition"
)

// CatalogShard is the shard whose partition holds a datastore's index catalog.
const CatalogShard = 0

// errorKindHeader names, on a statusBadCommand answer, which refusal it carries.
const errorKindHeader = "X-Schemaless-Error"

// IndexStats counts the entries of one index table.
type IndexStats = partition.IndexStats

// IndexApply proposes cmd to the leader of partition pid of ds and returns its result.
//
// Errors: ErrUnknownDatastore, ErrBadShard; ErrUnavailable (not applied);
// ErrIndeterminate (maybe applied; every index command is safe to retry);
// indexes.ErrBadCommand, indexes.ErrNotFound or indexes.ErrNotReady wrapped for a refused
// catalog command (nothing changed).
func (n *Node) IndexApply(ctx context.Context, ds string, pid int, cmd command.Index) (command.IndexResult, error) {
	r, err := n.localRoute(ds, pid)
	if err != nil {
		return command.IndexResult{}, err
	}
	return callLeaderOp(ctx, n, indexOp, ds, r, &cmd)
}

// CatalogApply applies one command to the index catalog of ds (on the leader of the partition
// holding CatalogShard). Errors as IndexApply.
func (n *Node) CatalogApply(ctx context.Context, ds string, cmd indexes.Command) (indexes.Result, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return indexes.Result{}, err
	}
	res, err := n.IndexApply(ctx, ds, d.routeOf(CatalogShard).spec.ID, command.Index{Op: command.IndexCatalog, Catalog: cmd})
	return res.Catalog, err
}

// Catalog reads the index catalog of ds with consistency c. Errors: ErrUnknownDatastore,
// ErrUnavailable.
func (n *Node) Catalog(ctx context.Context, ds string, c Consistency) (*indexes.Catalog, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	r := d.routeOf(CatalogShard)
	resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
		Read: partition.ReadRequest{Catalog: &partition.CatalogRead{}}})
	if err != nil {
		return nil, err
	}
	if resp.Catalog == nil {
		return nil, fmt.Errorf("%w: no catalog in the answer", ErrUnavailable)
	}
	return indexes.DecodeCatalog(resp.Catalog)
}

// PutIndexEntries merges entries into index table table (fields: the version's fields, shard
// field first) of ds: one IndexUpsert per partition, the partitions in parallel. Blocks until
// every partition applied its part or ctx ends. Errors as IndexApply; on error some partitions
// may have applied theirs (retrying is safe: merges are idempotent). A partition that refuses
// its part as out of range (a split or merge moved a shard) has the whole call sent again by
// the newer catalog (rerouted), the parts applied before included.
func (n *Node) PutIndexEntries(ctx context.Context, ds, table string, fields []indexes.Field, entries []command.IndexEntry) (changed int, err error) {
	return rerouted(ctx, n, func() (int, error) { return n.putIndexEntries(ctx, ds, table, fields, entries) })
}

func (n *Node) putIndexEntries(ctx context.Context, ds, table string, fields []indexes.Field, entries []command.IndexEntry) (changed int, err error) {
	d, err := n.datastore(ds)
	if err != nil {
		return 0, err
	}
	byPart := map[int][]command.IndexEntry{}
	for _, e := range entries {
		if int(e.Shard) < 0 || int(e.Shard) >= d.spec.Shards {
			return 0, fmt.Errorf("%w: index entry shard %d", ErrBadShard, e.Shard)
		}
		pid := d.routeOf(int(e.Shard)).spec.ID
		byPart[pid] = append(byPart[pid], e)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for pid, es := range byPart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.IndexApply(ctx, ds, pid, command.Index{Op: command.IndexUpsert, Table: table, Fields: fields, Entries: es})
			mu.Lock()
			defer mu.Unlock()
			changed += res.Changed
			if err != nil {
				errs = append(errs, fmt.Errorf("partition %d: %w", pid, err))
			}
		}()
	}
	wg.Wait()
	return changed, errors.Join(errs...)
}

// DropIndexTable drops index table table on every partition of ds (in parallel). Partitions
// ignore later upserts into it. Errors as IndexApply; retrying is safe.
func (n *Node) DropIndexTable(ctx context.Context, ds, table string) error {
	d, err := n.datastore(ds)
	if err != nil {
		return err
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
	)
	for _, r := range d.partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := n.IndexApply(ctx, ds, r.spec.ID, command.Index{Op: command.IndexDrop, Table: table})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("partition %d: %w", r.spec.ID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FirstCells returns, for row keys of shard, the first cell of column appended for each
// (lowest added_id; see storage.PartitionStore.FirstCells), read with consistency c from a
// replica whose shard log reaches added_id atLeast (0: any; see partition.FirstCellsRead).
// Errors: ErrUnknownDatastore, ErrBadShard, ErrUnavailable (also when no replica asked
// reaches atLeast).
func (n *Node) FirstCells(ctx context.Context, ds string, shard int, column string, rowKeys []uuid.UUID, atLeast int64, c Consistency) (map[uuid.UUID]cells.Cell, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	if shard < 0 || shard >= d.spec.Shards {
		return nil, fmt.Errorf("%w: shard %d", ErrBadShard, shard)
	}
	r := d.routeOf(shard)
	resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
		Read: partition.ReadRequest{FirstCells: &partition.FirstCellsRead{Shard: shard, Column: column, RowKeys: rowKeys, AtLeast: atLeast}}})
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]cells.Cell, len(resp.Cells))
	for _, c := range resp.Cells {
		out[c.Key.RowKey] = c
	}
	return out, nil
}

// QueryIndex runs plan (compiled by indexes.Compile) against index table table on the one
// index shard plan.Shard, with consistency c (strong: the partition's leader after a read
// index; stale: any replica). Entries come back typed, with their refs. Errors:
// ErrUnknownDatastore, ErrBadShard, ErrUnavailable, or the store's error.
func (n *Node) QueryIndex(ctx context.Context, ds, table string, fields []indexes.Field, plan indexes.Plan, c Consistency) ([]indexes.Entry, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	if plan.Shard < 0 || plan.Shard >= d.spec.Shards {
		return nil, fmt.Errorf("%w: shard %d", ErrBadShard, plan.Shard)
	}
	r := d.routeOf(plan.Shard)
	resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
		Read: partition.ReadRequest{Index: &partition.IndexRead{Table: table, Fields: fields, Plan: partition.PackIndexPlan(plan), Shard: plan.Shard}}})
	if err != nil {
		return nil, err
	}
	return partition.UnpackIndexEntries(fields, resp.Entries)
}

// IndexTableStats counts the entries and violations of index table table over every partition
// of ds (stale reads, partitions in parallel). Errors: ErrUnknownDatastore,
// ErrUnavailable.
func (n *Node) IndexTableStats(ctx context.Context, ds, table string, fields []indexes.Field) (IndexStats, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return IndexStats{}, err
	}
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		errs  []error
		total IndexStats
	)
	for _, r := range d.partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: Stale,
				Read: partition.ReadRequest{IndexStats: &partition.IndexStatsRead{Table: table, Fields: fields}}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			total.Entries += resp.Stats.Entries
			total.Violations += resp.Stats.Violations
		}()
	}
	wg.Wait()
	return total, errors.Join(errs...)
}

// indexErrorKind names a refused index command for errorKindHeader.
func indexErrorKind(err error) string {
	switch {
	case errors.Is(err, indexes.ErrNotFound):
		return "index-not-found"
	case errors.Is(err, indexes.ErrNotReady):
		return "index-not-ready"
	case errors.Is(err, indexes.ErrBadCommand):
		return "index-bad-command"
	}
	return ""
}

// indexErrorOf rebuilds a refused index command's error from errorKindHeader.
func indexErrorOf(kind string) error {
	switch kind {
	case "index-not-found":
		return indexes.ErrNotFound
	case "index-not-ready":
		return indexes.ErrNotReady
	case "index-bad-command":
		return indexes.ErrBadCommand
	}
	return nil
}
