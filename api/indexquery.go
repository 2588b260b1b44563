package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/wire"
)

// The index query: its body, decoded strictly, and POST /v1/{ds}/indexes/{index}/query.

// queryKeys are the keys of an index query body, in the order error messages list them.
var queryKeys = []string{"shard_value", "where", "fields", "columns", "order_by", "limit", "cursor", "version"}

// condKeys are the keys of one condition.
var condKeys = []string{"field", "op", "value"}

// checkKeys reports the first key of obj (in sorted order) that is not in known, naming it
// prefix + key.
func checkKeys(prefix string, obj map[string]json.RawMessage, known []string) *httpError {
	var unknown []string
	for k := range obj {
		found := false
		for _, kk := range known {
			found = found || k == kk
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return invalid(prefix+unknown[0], "unknown key (want %s)", strings.Join(known, ", "))
}

// decodeValue decodes raw into v with numbers kept as json.Number; a value of the wrong JSON
// type is a 400 naming field.
func decodeValue(field string, raw json.RawMessage, v any) *httpError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var fe *indexes.FieldError
		if errors.As(err, &fe) {
			return indexFieldError(field, err)
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return invalid(field, "has JSON type %s, want %s", ute.Value, jsonTypeName(ute.Type.String()))
		}
		return invalid(field, "%v", err)
	}
	return nil
}

// jsonTypeName names a Go type as the JSON it decodes from.
func jsonTypeName(goType string) string {
	switch goType {
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "[]string":
		return "a list of strings"
	case "[]json.RawMessage":
		return "a list of conditions"
	}
	return goType
}

// decodeIndexQuery decodes the body of an index query, strictly: the body must be one JSON
// object with only the known keys (conditions too), each of the right JSON type; numbers stay
// json.Number so that the index's field types decide their meaning.
func decodeIndexQuery(b []byte) (indexes.Query, *httpError) {
	var q indexes.Query
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&top); err != nil || top == nil {
		return q, invalid("body", "want a JSON object with keys %s", strings.Join(queryKeys, ", "))
	}
	if dec.More() {
		return q, invalid("body", "data after the JSON value")
	}
	if he := checkKeys("", top, queryKeys); he != nil {
		return q, he
	}
	for _, k := range queryKeys {
		raw, ok := top[k]
		if !ok {
			continue
		}
		var he *httpError
		switch k {
		case "shard_value":
			he = decodeValue(k, raw, &q.ShardValue)
		case "where":
			var conds []json.RawMessage
			if he = decodeValue(k, raw, &conds); he != nil {
				break
			}
			for i, c := range conds {
				where := fmt.Sprintf("where[%d]", i)
				var obj map[string]json.RawMessage
				if err := json.Unmarshal(c, &obj); err != nil || obj == nil {
					he = invalid(where, "want an object {\"field\", \"op\", \"value\"}")
					break
				}
				if he = checkKeys(where+".", obj, condKeys); he != nil {
					break
				}
				var cond indexes.Cond
				if raw, ok := obj["field"]; ok {
					if he = decodeValue(where+".field", raw, &cond.Field); he != nil {
						break
					}
				}
				if raw, ok := obj["op"]; ok {
					if he = decodeValue(where+".op", raw, &cond.Op); he != nil {
						break
					}
				}
				if raw, ok := obj["value"]; ok {
					if he = decodeValue(where+".value", raw, &cond.Value); he != nil {
						break
					}
				}
				q.Where = append(q.Where, cond)
			}
		case "fields":
			he = decodeValue(k, raw, &q.Fields)
		case "columns":
			he = decodeValue(k, raw, &q.Columns)
		case "order_by":
			if string(bytes.TrimSpace(raw)) != "null" {
				q.OrderBy = &indexes.OrderBy{}
				he = decodeValue(k, raw, q.OrderBy)
			}
		case "limit":
			he = decodeValue(k, raw, &q.Limit)
		case "cursor":
			he = decodeValue(k, raw, &q.Cursor)
		case "version":
			he = decodeValue(k, raw, &q.Version)
			if he == nil && q.Version < 0 {
				he = invalid(k, "%d is not a version (1 or more; 0 or absent: the alias)", q.Version)
			}
		}
		if he != nil {
			return q, he
		}
	}
	return q, nil
}

// indexQuery serves POST /v1/{ds}/indexes/{index}/query.
func (s *Server) indexQuery(w http.ResponseWriter, r *http.Request) error {
	in, err := s.parse(r, want{maxBody: s.cfg.MaxIndexRequestBytes})
	if err != nil {
		return err
	}
	ds := in.ds
	c, he := consistency(r)
	if he != nil {
		return he
	}
	raw, err := in.body()
	if err != nil {
		return err
	}
	q, he := decodeIndexQuery(raw)
	if he != nil {
		return he
	}
	shards := in.spec.Shards
	name := indexName(r)
	ctx := r.Context()
	v, stale, err := s.resolveIndex(ctx, ds, name, q.Version)
	if err != nil {
		return catalogError(err)
	}
	lim := indexes.Limits{DefaultLimit: s.cfg.DefaultIndexLimit, MaxLimit: s.cfg.MaxIndexLimit,
		MaxConds: s.cfg.MaxIndexConds, MaxInValues: s.cfg.MaxIndexInValues, MaxColumns: s.cfg.MaxIndexColumns}
	plan, err := indexes.Compile(v.Definition, q, shards, lim)
	if err != nil && stale {
		// The query may be meant for a version the cached catalog does not know yet (a field
		// added by an alias switch a moment ago): resolve again, strongly.
		if cat, _, cerr := s.queryCatalog(ctx, ds, true); cerr == nil {
			if nv, rerr := cat.Resolve(name, q.Version); rerr == nil && nv.Version != v.Version {
				if nplan, perr := indexes.Compile(nv.Definition, q, shards, lim); perr == nil {
					v, plan, err, stale = nv, nplan, nil, false
				}
			}
		}
	}
	if err != nil {
		return indexFieldError("body", err)
	}
	fields := v.Definition.Fields()
	entries, err := s.b.Indexes.QueryIndex(ctx, ds, v.Table(), fields, plan, c)
	if (err != nil || len(entries) == 0) && stale && ctx.Err() == nil {
		// The cached or stale catalog may name a version that is being dropped: a dropped
		// table answers nothing, and a failure may be its drop. Resolve again, strongly: the
		// drop of a version's tables follows its dropping state in the catalog, so a strong read
		// after the query sees it. Query again if the version changed.
		cat, _, cerr := s.queryCatalog(ctx, ds, true)
		if cerr == nil {
			nv, rerr := cat.Resolve(name, q.Version)
			switch {
			case rerr != nil:
				return catalogError(rerr)
			case nv.Version != v.Version || nv.State != v.State:
				nplan, perr := indexes.Compile(nv.Definition, q, shards, lim)
				if perr != nil {
					return indexFieldError("body", perr)
				}
				v, plan, fields = nv, nplan, nv.Definition.Fields()
				entries, err = s.b.Indexes.QueryIndex(ctx, ds, v.Table(), fields, plan, c)
			}
		}
	}
	if errors.Is(err, cluster.ErrBadShard) {
		// The plan's shard is always valid: this is the store's failure, not the request's.
		return fmt.Errorf("api: index query: %s", err.Error())
	}
	if err != nil {
		return err
	}
	out := wire.IndexQueryResult{Index: name, Version: v.Version, Entries: make([]wire.IndexEntry, len(entries))}
	for i, e := range entries {
		we := wire.IndexEntry{RowKey: e.RowKey.String(), Fields: make(map[string]any, len(plan.Fields)), Violation: e.Violation}
		for _, fi := range plan.Fields {
			var val any
			if fi < len(e.Values) {
				val = indexes.Format(fields[fi].Type, e.Values[fi])
			}
			we.Fields[fields[fi].Name] = val
		}
		out.Entries[i] = we
	}
	if len(plan.Columns) > 0 && len(entries) > 0 {
		keys := make([]cluster.GetKey, 0, len(entries)*len(plan.Columns))
		for _, e := range entries {
			for _, col := range plan.Columns {
				keys = append(keys, cluster.GetKey{Key: cells.Key{RowKey: e.RowKey, ColumnKey: col}, Latest: true})
			}
		}
		res, err := s.b.Indexes.GetCells(ctx, ds, keys, c)
		if err != nil {
			return err
		}
		for i, rr := range res {
			if !rr.Found {
				continue
			}
			ac, err := toAPICell(rr.Cell)
			if err != nil {
				return err
			}
			we := &out.Entries[i/len(plan.Columns)]
			if we.Cells == nil {
				we.Cells = map[string]wire.Cell{}
			}
			we.Cells[plan.Columns[i%len(plan.Columns)]] = ac
		}
	}
	if len(entries) > 0 && len(entries) >= plan.Limit {
		out.NextCursor = indexes.NextCursor(plan, entries[len(entries)-1])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
