package partition

import (
	"context"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/storage"
)

// Index reads travel packed: a decoded MessagePack value does not keep its Go type (a UUID
// comes back as a byte slice, a number as whatever width fits it), so a plan is packed
// (command.PackIndexValues) before it leaves the caller and typed again from the index's fields
// (command.TypedIndexValue) where it is run, and entries come back packed and are typed by the
// caller. A local read takes the same path as a forwarded one.

// queryIndex serves an IndexRead from st.
func queryIndex(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, req IndexRead) ([]IndexEntry, error) {
	if err := inRange(shards, req.Shard); err != nil {
		return nil, err
	}
	plan, err := unpackPlan(req.Fields, req.Plan)
	if err != nil {
		return nil, err
	}
	es, err := st.QueryIndex(ctx, req.Shard, fsm.IndexTableOf(req.Table, req.Fields), storageQuery(plan))
	if err != nil {
		return nil, err
	}
	out := make([]IndexEntry, len(es))
	for i, e := range es {
		out[i] = IndexEntry{RowKey: e.RowKey, Values: command.PackIndexValues(e.Values), Refs: e.Refs, Violation: e.Violation}
	}
	return out, nil
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

// packValue packs one value for the wire (command.PackIndexValues).
func packValue(v any) any { return command.PackIndexValues([]any{v})[0] }

// PackIndexPlan returns a copy of p with its values packed, for IndexRead.Plan. p is not
// modified.
func PackIndexPlan(p indexes.Plan) indexes.Plan {
	p.ShardValue = packValue(p.ShardValue)
	where := make([]indexes.PlanCond, len(p.Where))
	for i, c := range p.Where {
		c.Values = command.PackIndexValues(c.Values)
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

// unpackPlan types the values of a packed plan from the index's fields. Errors: ErrBadRead (no
// fields, a condition on a column the fields lack), command.TypedIndexValue's.
func unpackPlan(fields []indexes.Field, p indexes.Plan) (indexes.Plan, error) {
	if len(fields) == 0 {
		return p, fmt.Errorf("%w: index query without fields", ErrBadRead)
	}
	var err error
	if p.ShardValue, err = command.TypedIndexValue(fields[0].Type, p.ShardValue); err != nil {
		return p, err
	}
	for i := range p.Where {
		c := &p.Where[i]
		if c.Column < 0 || c.Column >= len(fields) {
			return p, fmt.Errorf("%w: condition on column %d", ErrBadRead, c.Column)
		}
		for j, v := range c.Values {
			if c.Values[j], err = command.TypedIndexValue(fields[c.Column].Type, v); err != nil {
				return p, err
			}
		}
	}
	if p.After != nil && p.OrderBy >= 0 && p.OrderBy < len(fields) {
		if p.After.Value, err = command.TypedIndexValue(fields[p.OrderBy].Type, p.After.Value); err != nil {
			return p, err
		}
	}
	return p, nil
}

// UnpackIndexEntries types the entries of an IndexRead's answer from the index's fields (the
// same fields as the read's) and decodes their refs. Errors: an entry whose values do not fit
// the fields, or whose refs do not decode.
func UnpackIndexEntries(fields []indexes.Field, pes []IndexEntry) ([]indexes.Entry, error) {
	out := make([]indexes.Entry, len(pes))
	for i, pe := range pes {
		if len(pe.Values) != len(fields) {
			return nil, fmt.Errorf("partition: index entry with %d values for %d fields", len(pe.Values), len(fields))
		}
		e := indexes.Entry{RowKey: pe.RowKey, Values: make([]any, len(fields)), Violation: pe.Violation}
		for j, v := range pe.Values {
			tv, err := command.TypedIndexValue(fields[j].Type, v)
			if err != nil {
				return nil, fmt.Errorf("partition: index entry %s field %s: %w", pe.RowKey, fields[j].Name, err)
			}
			e.Values[j] = tv
		}
		refs, err := indexes.DecodeRefs(pe.Refs)
		if err != nil {
			return nil, fmt.Errorf("partition: index entry %s refs: %w", pe.RowKey, err)
		}
		e.Refs = refs
		out[i] = e
	}
	return out, nil
}
