package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// CatalogShard is the shard whose partition holds a datastore's index catalog.
const CatalogShard = 0

// Index RPC: one encoded fsm.IndexCommand forwarded to a partition's leader.
const rpcIndexPath = "/internal/v1/index"

// errorKindHeader names, on a statusBadCommand answer, which refusal it carries.
const errorKindHeader = "X-Schemaless-Error"

type indexRPC struct {
	Datastore     string
	Partition     int
	TimeoutMicros int64
	Command       []byte // fsm.EncodeIndexCommand
}

type indexRPCResponse struct {
	Result fsm.IndexResult
}

// indexRead is the index part of a readRequest. Values travel packed (fsm.PackIndexValues) and are typed
// again from Fields on arrival.
type indexRead struct {
	Table   string
	Fields  []indexes.Field
	Plan    indexes.Plan
	Shard   int
	Column  string
	RowKeys []uuid.UUID
}

// IndexStats counts the entries of one index table.
type IndexStats struct {
	// Entries is the number of index entries (one per row key).
	Entries int64
	// Violations counts entries whose shard field a later cell tried to change.
	Violations int64
}

// IndexApply proposes cmd to the leader of partition pid of ds and returns its result.
//
// Errors: ErrUnknownDatastore, ErrBadShard; partition.ErrUnavailable (not applied);
// partition.ErrIndeterminate (maybe applied; every index command is safe to retry);
// indexes.ErrBadCommand, indexes.ErrNotFound or indexes.ErrNotReady wrapped for a refused
// catalog command (nothing changed).
func (n *Node) IndexApply(ctx context.Context, ds string, pid int, cmd fsm.IndexCommand) (fsm.IndexResult, error) {
	r, err := n.localRoute(ds, pid)
	if err != nil {
		return fsm.IndexResult{}, err
	}
	var res fsm.IndexResult
	err = n.callLeader(ctx, r, true,
		func(ctx context.Context) (err error) {
			if r.async != nil {
				res, err = r.async.ApplyIndex(ctx, cmd)
				return err
			}
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			res, err = p.ApplyIndex(ctx, cmd)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) error {
			data, err := fsm.EncodeIndexCommand(cmd)
			if err != nil {
				return err
			}
			req := indexRPC{Datastore: ds, Partition: pid, TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout), Command: data}
			var resp indexRPCResponse
			err = n.forward(ctx, target, rpcIndexPath, &req, &resp, true, 0)
			res = resp.Result
			return err
		})
	return res, err
}

func (n *Node) serveIndex(w http.ResponseWriter, r *http.Request) {
	var req indexRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad index request: "+err.Error(), http.StatusBadRequest)
		return
	}
	cmd, err := fsm.DecodeIndexCommand(req.Command)
	if err != nil {
		http.Error(w, "bad index request: "+err.Error(), http.StatusBadRequest)
		return
	}
	p := n.hostedReplica(w, req.Datastore, req.Partition)
	if p == nil {
		return
	}
	ctx, cancel := rpcContext(r, req.TimeoutMicros)
	defer cancel()
	res, err := p.ApplyIndex(ctx, cmd)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, indexRPCResponse{Result: res})
}

// CatalogApply applies one command to the index catalog of ds (on the leader of the partition
// holding CatalogShard). Errors as IndexApply.
func (n *Node) CatalogApply(ctx context.Context, ds string, cmd indexes.Command) (indexes.Result, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return indexes.Result{}, err
	}
	res, err := n.IndexApply(ctx, ds, d.routeOf(CatalogShard).spec.ID, fsm.IndexCommand{Op: fsm.IndexCatalog, Catalog: cmd})
	return res.Catalog, err
}

// Catalog reads the index catalog of ds with consistency c. Errors: ErrUnknownDatastore,
// partition.ErrUnavailable.
func (n *Node) Catalog(ctx context.Context, ds string, c Consistency) (*indexes.Catalog, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	r := d.routeOf(CatalogShard)
	resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "catalog"})
	if err != nil {
		return nil, err
	}
	if resp.Catalog == nil {
		return nil, fmt.Errorf("%w: no catalog in the answer", partition.ErrUnavailable)
	}
	return indexes.DecodeCatalog(resp.Catalog)
}

// PutIndexEntries merges entries into index table table (fields: the version's fields, shard
// field first) of ds: one IndexUpsert per partition, the partitions in parallel. Blocks until
// every partition applied its part or ctx ends. Errors as IndexApply; on error some partitions
// may have applied theirs (retrying is safe: merges are idempotent).
func (n *Node) PutIndexEntries(ctx context.Context, ds, table string, fields []indexes.Field, entries []fsm.IndexEntry) (changed int, err error) {
	d, err := n.datastore(ds)
	if err != nil {
		return 0, err
	}
	byPart := map[int][]fsm.IndexEntry{}
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
			res, err := n.IndexApply(ctx, ds, pid, fsm.IndexCommand{Op: fsm.IndexUpsert, Table: table, Fields: fields, Entries: es})
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
			_, err := n.IndexApply(ctx, ds, r.spec.ID, fsm.IndexCommand{Op: fsm.IndexDrop, Table: table})
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
// (lowest added_id; see storage.PartitionStore.FirstCells), read with consistency c. Errors:
// ErrUnknownDatastore, ErrBadShard, partition.ErrUnavailable.
func (n *Node) FirstCells(ctx context.Context, ds string, shard int, column string, rowKeys []uuid.UUID, c Consistency) (map[uuid.UUID]cells.Cell, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	if shard < 0 || shard >= d.spec.Shards {
		return nil, fmt.Errorf("%w: shard %d", ErrBadShard, shard)
	}
	r := d.routeOf(shard)
	resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "first",
		Index: &indexRead{Shard: shard, Column: column, RowKeys: rowKeys}})
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
// ErrUnknownDatastore, ErrBadShard, partition.ErrUnavailable, or the store's error.
func (n *Node) QueryIndex(ctx context.Context, ds, table string, fields []indexes.Field, plan indexes.Plan, c Consistency) ([]indexes.Entry, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	if plan.Shard < 0 || plan.Shard >= d.spec.Shards {
		return nil, fmt.Errorf("%w: shard %d", ErrBadShard, plan.Shard)
	}
	r := d.routeOf(plan.Shard)
	resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "index",
		Index: &indexRead{Table: table, Fields: fields, Plan: packPlan(plan), Shard: plan.Shard}})
	if err != nil {
		return nil, err
	}
	return unpackEntries(fields, resp.Entries)
}

// IndexTableStats counts the entries and violations of index table table over every partition
// of ds (stale reads, partitions in parallel). Errors: ErrUnknownDatastore,
// partition.ErrUnavailable.
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
			resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: Stale, Op: "indexstats",
				Index: &indexRead{Table: table, Fields: fields}})
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

// readIndex serves the index read ops from st.
func (n *Node) readIndex(ctx context.Context, r *route, st *storage.PartitionStore, req readRequest) (readResponse, error) {
	var resp readResponse
	if req.Op == "catalog" {
		c, err := fsm.LoadCatalog(ctx, st)
		if err != nil {
			return resp, err
		}
		b, err := indexes.EncodeCatalog(c)
		resp.Catalog = b
		return resp, err
	}
	ir := req.Index
	if ir == nil {
		return resp, fmt.Errorf("%w: index read without its request", ErrBadShard)
	}
	switch req.Op {
	case "first":
		if !r.spec.Shards().Contains(ir.Shard) {
			return resp, fmt.Errorf("%w: shard %d is not in partition %d", ErrBadShard, ir.Shard, r.spec.ID)
		}
		m, err := st.FirstCells(ctx, ir.Shard, ir.Column, ir.RowKeys)
		if err != nil {
			return resp, err
		}
		for _, rk := range ir.RowKeys {
			if c, ok := m[rk]; ok {
				resp.Cells = append(resp.Cells, c)
				delete(m, rk)
			}
		}
	case "index":
		if !r.spec.Shards().Contains(ir.Shard) {
			return resp, fmt.Errorf("%w: shard %d is not in partition %d", ErrBadShard, ir.Shard, r.spec.ID)
		}
		plan, err := unpackPlan(ir.Fields, ir.Plan)
		if err != nil {
			return resp, err
		}
		t := fsm.IndexTableOf(ir.Table, ir.Fields)
		es, err := st.QueryIndex(ctx, ir.Shard, t, storageQuery(plan))
		if err != nil {
			return resp, err
		}
		resp.Entries = make([]packedEntry, len(es))
		for i, e := range es {
			resp.Entries[i] = packedEntry{RowKey: e.RowKey, Values: fsm.PackIndexValues(e.Values), Refs: e.Refs, Violation: e.Violation}
		}
	case "indexstats":
		entries, violations, err := st.IndexStats(ctx, fsm.IndexTableOf(ir.Table, ir.Fields))
		if err != nil {
			return resp, err
		}
		resp.Stats = IndexStats{Entries: entries, Violations: violations}
	default:
		return resp, fmt.Errorf("cluster: unknown read op %q", req.Op)
	}
	return resp, nil
}

// packedEntry is an index entry on the wire: values packed, refs encoded.
type packedEntry struct {
	RowKey    uuid.UUID
	Values    []any
	Refs      []byte
	Violation int64
}

// storageQuery turns a plan into the store's query.
func storageQuery(p indexes.Plan) storage.IndexQuery {
	q := storage.IndexQuery{ShardValue: p.ShardValue, OrderBy: p.OrderBy, Desc: p.Desc, Limit: p.Limit}
	for _, c := range p.Where {
		q.Where = append(q.Where, storage.IndexCond{Column: c.Column, Op: c.Op, Values: c.Values})
	}
	if p.After != nil {
		q.After = &storage.IndexCursor{Value: p.After.Value, RowKey: p.After.RowKey}
	}
	return q
}

// packValue packs one value for the wire (fsm.PackIndexValues).
func packValue(v any) any { return fsm.PackIndexValues([]any{v})[0] }

// packPlan packs the values of a plan for the wire.
func packPlan(p indexes.Plan) indexes.Plan {
	p.ShardValue = packValue(p.ShardValue)
	where := make([]indexes.PlanCond, len(p.Where))
	for i, c := range p.Where {
		c.Values = fsm.PackIndexValues(c.Values)
		where[i] = c
	}
	p.Where = where
	if p.After != nil {
		a := *p.After
		a.Value = packValue(a.Value)
		p.After = &a
	}
	return p
}

// unpackPlan types the values of a plan that came off the wire.
func unpackPlan(fields []indexes.Field, p indexes.Plan) (indexes.Plan, error) {
	if len(fields) == 0 {
		return p, fmt.Errorf("%w: index query without fields", ErrBadShard)
	}
	var err error
	if p.ShardValue, err = fsm.TypedIndexValue(fields[0].Type, p.ShardValue); err != nil {
		return p, err
	}
	for i := range p.Where {
		c := &p.Where[i]
		if c.Column < 0 || c.Column >= len(fields) {
			return p, fmt.Errorf("%w: condition on column %d", ErrBadShard, c.Column)
		}
		for j, v := range c.Values {
			if c.Values[j], err = fsm.TypedIndexValue(fields[c.Column].Type, v); err != nil {
				return p, err
			}
		}
	}
	if p.After != nil && p.OrderBy >= 0 && p.OrderBy < len(fields) {
		if p.After.Value, err = fsm.TypedIndexValue(fields[p.OrderBy].Type, p.After.Value); err != nil {
			return p, err
		}
	}
	return p, nil
}

// unpackEntries types entries that came off the wire (or from this node: the same path).
func unpackEntries(fields []indexes.Field, pes []packedEntry) ([]indexes.Entry, error) {
	out := make([]indexes.Entry, len(pes))
	for i, pe := range pes {
		if len(pe.Values) != len(fields) {
			return nil, fmt.Errorf("cluster: index entry with %d values for %d fields", len(pe.Values), len(fields))
		}
		e := indexes.Entry{RowKey: pe.RowKey, Values: make([]any, len(fields)), Violation: pe.Violation}
		for j, v := range pe.Values {
			tv, err := fsm.TypedIndexValue(fields[j].Type, v)
			if err != nil {
				return nil, fmt.Errorf("cluster: index entry %s field %s: %w", pe.RowKey, fields[j].Name, err)
			}
			e.Values[j] = tv
		}
		refs, err := indexes.DecodeRefs(pe.Refs)
		if err != nil {
			return nil, fmt.Errorf("cluster: index entry %s refs: %w", pe.RowKey, err)
		}
		e.Refs = refs
		out[i] = e
	}
	return out, nil
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
