package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/wire"
)

// The secondary-index routes: define, list, show, alias, drop and query. The catalog (package
// indexes) lives in the datastore, replicated by raft; the maintainers (package
// maintainer) that every node runs build and maintain the index tables.

// cachedCatalog is a read of a datastore's index catalog and when it was read. The catalog is
// shared by concurrent queries and never modified.
type cachedCatalog struct {
	cat *indexes.Catalog
	at  time.Time
}

// queryCatalog returns the catalog of ds to resolve a query with: the cached one while younger
// than IndexCatalogTTL, else a stale read (any replica), which it caches. With strong it reads
// through the catalog partition's leader (and caches that). stale reports whether the catalog
// may be behind (cached, or read from a replica).
func (s *Server) queryCatalog(ctx context.Context, ds string, strong bool) (cat *indexes.Catalog, stale bool, err error) {
	if !strong && s.cfg.IndexCatalogTTL > 0 {
		s.catMu.Lock()
		cc, ok := s.catalogs[ds]
		s.catMu.Unlock()
		if ok && time.Since(cc.at) < s.cfg.IndexCatalogTTL {
			return cc.cat, true, nil
		}
	}
	c := cluster.Stale
	if strong {
		c = cluster.Strong
	}
	at := time.Now()
	cat, err = s.backend.Catalog(ctx, ds, c)
	if err != nil {
		return nil, false, err
	}
	if s.cfg.IndexCatalogTTL > 0 {
		s.catMu.Lock()
		if cc, ok := s.catalogs[ds]; !ok || !cc.at.After(at) {
			s.catalogs[ds] = cachedCatalog{cat: cat, at: at}
		}
		s.catMu.Unlock()
	}
	return cat, !strong, nil
}

// forgetCatalog drops the cached catalog of ds, after a change made through this node.
func (s *Server) forgetCatalog(ds string) {
	s.catMu.Lock()
	delete(s.catalogs, ds)
	s.catMu.Unlock()
}

// resolveIndex returns the version of index name that a query for version (0: the alias) uses.
// A cached or stale catalog that finds no ready version is read again, strongly, so that a
// version that just became ready (or an alias just set) is found. stale is as in queryCatalog,
// for the catalog that resolved it.
func (s *Server) resolveIndex(ctx context.Context, ds, name string, version int) (v indexes.Version, stale bool, err error) {
	cat, stale, err := s.queryCatalog(ctx, ds, false)
	if err != nil {
		return v, false, err
	}
	v, err = cat.Resolve(name, version)
	if err == nil || !(errors.Is(err, indexes.ErrNotFound) || errors.Is(err, indexes.ErrNotReady)) {
		return v, stale, err
	}
	if cat, _, err = s.queryCatalog(ctx, ds, true); err != nil {
		return v, false, err
	}
	v, err = cat.Resolve(name, version)
	return v, false, err
}

// catalogError maps the catalog's refusals: ErrNotFound 404, ErrNotReady and ErrBadCommand 409
// (the message names the state or the rule); others as backendError.
func catalogError(err error) *httpError {
	switch {
	case errors.Is(err, indexes.ErrNotFound):
		return &httpError{status: http.StatusNotFound, code: wire.CodeNotFound, msg: err.Error()}
	case errors.Is(err, indexes.ErrNotReady), errors.Is(err, indexes.ErrBadCommand):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	}
	return backendError(err)
}

// failCatalog writes the answer of a catalog error, logging internal ones.
func (s *Server) failCatalog(w http.ResponseWriter, r *http.Request, err error) {
	e := catalogError(err)
	if e.status >= 500 {
		s.fail(w, r, err)
		return
	}
	writeError(w, e)
}

// indexFieldError turns an error of the indexes package into a 400 naming the field of its
// first *indexes.FieldError (or fallback when it has none). The message lists every problem.
func indexFieldError(fallback string, err error) *httpError {
	field := fallback
	var fe *indexes.FieldError
	if errors.As(err, &fe) {
		field = fe.Field
	}
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if !strings.HasPrefix(msg, field+": ") {
		msg = field + ": " + msg
	}
	return &httpError{status: http.StatusBadRequest, code: wire.CodeInvalidArgument, field: field, msg: msg}
}

func toWireDefinition(d indexes.Definition) wire.IndexDefinition {
	out := wire.IndexDefinition{Table: d.Table, Datastore: d.Datastore, ShardField: d.ShardField,
		ColumnDefs: make([]wire.IndexColumnDef, len(d.ColumnDefs))}
	for i, cd := range d.ColumnDefs {
		wc := wire.IndexColumnDef{ColumnKey: cd.ColumnKey, Fields: make([]wire.IndexFieldDef, len(cd.Fields))}
		for j, f := range cd.Fields {
			wc.Fields[j] = wire.IndexFieldDef{Field: f.Field, Type: string(f.Type)}
		}
		out.ColumnDefs[i] = wc
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// indexDefine serves POST /v1/{ds}/indexes: a definition in YAML or JSON.
func (s *Server) indexDefine(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxIndexRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	def, err := indexes.ParseDefinition(raw)
	if err != nil {
		writeError(w, indexFieldError("definition", err))
		return
	}
	if def.Datastore != "" && def.Datastore != ds {
		writeError(w, invalid("datastore", "%q is not the datastore of the path, %q", def.Datastore, ds))
		return
	}
	// The definition belongs to the path's datastore; naming it or not defines the same index.
	def.Datastore = ds
	res, err := s.backend.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpDefine, Name: def.Table, Definition: def})
	s.forgetCatalog(ds)
	if err != nil {
		if errors.Is(err, indexes.ErrBadCommand) {
			writeError(w, indexFieldError("definition", err))
			return
		}
		s.failCatalog(w, r, err)
		return
	}
	out := wire.IndexDefineResult{Index: def.Table, Version: res.Version, State: string(indexes.StateBuilding), Created: res.Created}
	if !res.Created {
		cat, err := s.backend.Catalog(r.Context(), ds, cluster.Strong)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if ix := cat.Indexes[def.Table]; ix != nil {
			for _, v := range ix.Versions {
				if v.Version == res.Version {
					out.State = string(v.State)
				}
			}
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeJSON(w, http.StatusCreated, out)
}

// indexList serves GET /v1/{ds}/indexes: every index without per-shard offsets.
func (s *Server) indexList(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return
	}
	cat, err := s.backend.Catalog(r.Context(), ds, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	names := make([]string, 0, len(cat.Indexes))
	for n := range cat.Indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := wire.IndexesResponse{Indexes: make([]wire.IndexStatus, 0, len(names))}
	for _, n := range names {
		out.Indexes = append(out.Indexes, s.indexStatus(r.Context(), ds, cat.Indexes[n], c, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// indexGet serves GET /v1/{ds}/indexes/{index}: one index with per-shard offsets.
func (s *Server) indexGet(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return
	}
	cat, err := s.backend.Catalog(r.Context(), ds, c)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := r.PathValue("index")
	ix := cat.Indexes[name]
	if ix == nil {
		writeError(w, notFound("no index %q in datastore %s", name, ds))
		return
	}
	writeJSON(w, http.StatusOK, s.indexStatus(r.Context(), ds, ix, c, true))
}

// indexStatus describes ix: every version, with entries and progress for the live ones. A
// measure that cannot be read is reported in the version's Error, not as a failure.
func (s *Server) indexStatus(ctx context.Context, ds string, ix *indexes.Index, c cluster.Consistency, perShard bool) wire.IndexStatus {
	out := wire.IndexStatus{Name: ix.Name, Alias: ix.Alias, Versions: make([]wire.IndexVersionStatus, 0, len(ix.Versions))}
	for _, v := range ix.Versions {
		vs := wire.IndexVersionStatus{Version: v.Version, State: string(v.State), Table: v.Table(),
			Definition: toWireDefinition(v.Definition), CreatedAt: v.CreatedAt.UTC(),
			ReadyAt: timePtr(v.ReadyAt), DroppedAt: timePtr(v.DroppedAt)}
		if v.State == indexes.StateBuilding || v.State == indexes.StateReady {
			var errs []string
			if st, err := s.backend.IndexTableStats(ctx, ds, v.Table(), v.Definition.Fields()); err != nil {
				errs = append(errs, "entries: "+err.Error())
			} else {
				vs.Entries, vs.Violations = st.Entries, st.Violations
			}
			if err := s.versionProgress(ctx, ds, v, c, perShard, &vs); err != nil {
				errs = append(errs, "progress: "+err.Error())
			}
			vs.Error = strings.Join(errs, "; ")
		}
		out.Versions = append(out.Versions, vs)
	}
	return out
}

// versionProgress fills the progress fields of vs from the maintainers' consumer group of v.
// Before any maintainer joined the group, nothing is handled: the shards' high-water marks are
// read instead.
func (s *Server) versionProgress(ctx context.Context, ds string, v indexes.Version, c cluster.Consistency, perShard bool, vs *wire.IndexVersionStatus) error {
	p, err := s.backend.GroupProgress(ctx, ds, indexes.GroupName(v.Definition.Table, v.Version), c)
	if errors.Is(err, cluster.ErrUnknownGroup) {
		p, err = s.unstartedProgress(ctx, ds)
	}
	if err != nil {
		return err
	}
	vs.Workers = len(p.Status.Members)
	vs.LagCells, vs.LagSeconds = p.LagCells, p.LagSeconds
	for _, sp := range p.Shards {
		hw := max(sp.HighWater, 0)
		vs.TotalCells += hw
		vs.HandledCells += min(max(sp.Offset, 0), hw)
		if perShard {
			vs.Shards = append(vs.Shards, wire.IndexShardProgress{Shard: sp.Shard, Owner: sp.Owner, Offset: sp.Offset,
				HighWater: sp.HighWater, LagCells: sp.LagCells, LagSeconds: sp.LagSeconds})
		}
	}
	vs.Progress = 1
	if vs.TotalCells > 0 {
		vs.Progress = float64(vs.HandledCells) / float64(vs.TotalCells)
	}
	return nil
}

// unstartedProgress is the progress of a group that does not exist yet: every shard's whole log
// to handle.
func (s *Server) unstartedProgress(ctx context.Context, ds string) (cluster.GroupProgress, error) {
	return s.backend.LogProgress(ctx, ds, nil)
}

// indexName reads the {index} path value. An invalid name is reported as unknown (404): it
// cannot name an index.
func indexName(r *http.Request) string { return r.PathValue("index") }

// indexAlias serves POST /v1/{ds}/indexes/{index}/alias with body {"version": N}.
func (s *Server) indexAlias(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxIndexRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	var in wire.IndexAliasRequest
	if len(bytes.TrimSpace(raw)) == 0 {
		writeError(w, invalid("version", "is required"))
		return
	}
	if he := decodeStrict(raw, &in); he != nil {
		writeError(w, he)
		return
	}
	if in.Version < 1 {
		writeError(w, invalid("version", "%d is not a version (1 or more)", in.Version))
		return
	}
	name := indexName(r)
	_, err := s.backend.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpAlias, Name: name, Version: in.Version})
	s.forgetCatalog(ds)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, wire.IndexAliasResult{Index: name, Alias: in.Version})
}

// indexDrop serves DELETE /v1/{ds}/indexes/{index}/versions/{version}: the version becomes
// dropping; then its tables are dropped and it is marked dropped right away when possible
// (otherwise the maintainers finish it).
func (s *Server) indexDrop(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	vtext := r.PathValue("version")
	version, err := strconv.Atoi(vtext)
	if err != nil || version < 1 {
		writeError(w, invalid("version", "%q is not a version (1 or more)", vtext))
		return
	}
	name := indexName(r)
	_, err = s.backend.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpDrop, Name: name, Version: version})
	s.forgetCatalog(ds)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	out := wire.IndexDropResult{Index: name, Version: version, State: string(indexes.StateDropping)}
	table := indexes.TableName(name, version)
	if err := s.backend.DropIndexTable(r.Context(), ds, table); err != nil {
		s.cfg.Logger.Warn("api: drop index tables; the maintainers will retry", "datastore", ds, "table", table, "error", err)
	} else if _, err := s.backend.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpDropped, Name: name, Version: version}); err != nil {
		s.cfg.Logger.Warn("api: mark index version dropped; the maintainers will retry", "datastore", ds, "table", table, "error", err)
	} else {
		out.State = string(indexes.StateDropped)
	}
	writeJSON(w, http.StatusOK, out)
}

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
func (s *Server) indexQuery(w http.ResponseWriter, r *http.Request) {
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	c, he := consistency(r)
	if he != nil {
		writeError(w, he)
		return
	}
	raw, he := readBody(r, s.cfg.MaxIndexRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	q, he := decodeIndexQuery(raw)
	if he != nil {
		writeError(w, he)
		return
	}
	spec, err := s.backend.Datastore(ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	name := indexName(r)
	ctx := r.Context()
	v, stale, err := s.resolveIndex(ctx, ds, name, q.Version)
	if err != nil {
		s.failCatalog(w, r, err)
		return
	}
	lim := indexes.Limits{DefaultLimit: s.cfg.DefaultIndexLimit, MaxLimit: s.cfg.MaxIndexLimit,
		MaxConds: s.cfg.MaxIndexConds, MaxInValues: s.cfg.MaxIndexInValues, MaxColumns: s.cfg.MaxIndexColumns}
	plan, err := indexes.Compile(v.Definition, q, spec.Shards, lim)
	if err != nil && stale {
		// The query may be meant for a version the cached catalog does not know yet (a field
		// added by an alias switch a moment ago): resolve again, strongly.
		if cat, _, cerr := s.queryCatalog(ctx, ds, true); cerr == nil {
			if nv, rerr := cat.Resolve(name, q.Version); rerr == nil && nv.Version != v.Version {
				if nplan, perr := indexes.Compile(nv.Definition, q, spec.Shards, lim); perr == nil {
					v, plan, err, stale = nv, nplan, nil, false
				}
			}
		}
	}
	if err != nil {
		writeError(w, indexFieldError("body", err))
		return
	}
	fields := v.Definition.Fields()
	entries, err := s.backend.QueryIndex(ctx, ds, v.Table(), fields, plan, c)
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
				s.failCatalog(w, r, rerr)
				return
			case nv.Version != v.Version || nv.State != v.State:
				nplan, perr := indexes.Compile(nv.Definition, q, spec.Shards, lim)
				if perr != nil {
					writeError(w, indexFieldError("body", perr))
					return
				}
				v, plan, fields = nv, nplan, nv.Definition.Fields()
				entries, err = s.backend.QueryIndex(ctx, ds, v.Table(), fields, plan, c)
			}
		}
	}
	if err != nil {
		if errors.Is(err, cluster.ErrBadShard) {
			// The plan's shard is always valid: this is the store's failure, not the request's.
			err = fmt.Errorf("api: index query: %s", err.Error())
		}
		s.fail(w, r, err)
		return
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
		res, err := s.backend.GetCells(ctx, ds, keys, c)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for i, rr := range res {
			if !rr.Found {
				continue
			}
			ac, err := toAPICell(rr.Cell)
			if err != nil {
				s.fail(w, r, err)
				return
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
}
