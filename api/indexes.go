package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

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
	cat, err = s.b.Indexes.Catalog(ctx, ds, c)
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
func (s *Server) indexDefine(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: s.cfg.MaxIndexRequestBytes})
	if err != nil {
		return err
	}
	raw, err := q.body()
	if err != nil {
		return err
	}
	def, err := indexes.ParseDefinition(raw)
	if err != nil {
		return indexFieldError("definition", err)
	}
	if def.Datastore != "" && def.Datastore != q.ds {
		return invalid("datastore", "%q is not the datastore of the path, %q", def.Datastore, q.ds)
	}
	// The definition belongs to the path's datastore; naming it or not defines the same index.
	def.Datastore = q.ds
	res, err := s.b.Indexes.CatalogApply(r.Context(), q.ds, indexes.Command{Op: indexes.OpDefine, Name: def.Table, Definition: def})
	s.forgetCatalog(q.ds)
	if errors.Is(err, indexes.ErrBadCommand) {
		return indexFieldError("definition", err)
	}
	if err != nil {
		return catalogError(err)
	}
	out := wire.IndexDefineResult{Index: def.Table, Version: res.Version, State: string(indexes.StateBuilding), Created: res.Created}
	if res.Created {
		writeJSON(w, http.StatusCreated, out)
		return nil
	}
	cat, err := s.b.Indexes.Catalog(r.Context(), q.ds, cluster.Strong)
	if err != nil {
		return err
	}
	if ix := cat.Indexes[def.Table]; ix != nil {
		for _, v := range ix.Versions {
			if v.Version == res.Version {
				out.State = string(v.State)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// indexList serves GET /v1/{ds}/indexes: every index without per-shard offsets.
func (s *Server) indexList(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	cat, err := s.b.Indexes.Catalog(r.Context(), q.ds, c)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(cat.Indexes))
	for n := range cat.Indexes {
		names = append(names, n)
	}
	sort.Strings(names)
	out := wire.IndexesResponse{Indexes: make([]wire.IndexStatus, 0, len(names))}
	for _, n := range names {
		out.Indexes = append(out.Indexes, s.indexStatus(r.Context(), q.ds, cat.Indexes[n], c, false))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// indexGet serves GET /v1/{ds}/indexes/{index}: one index with per-shard offsets.
func (s *Server) indexGet(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	cat, err := s.b.Indexes.Catalog(r.Context(), q.ds, c)
	if err != nil {
		return err
	}
	name := r.PathValue("index")
	ix := cat.Indexes[name]
	if ix == nil {
		return notFound("no index %q in datastore %s", name, q.ds)
	}
	writeJSON(w, http.StatusOK, s.indexStatus(r.Context(), q.ds, ix, c, true))
	return nil
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
			if st, err := s.b.Indexes.IndexTableStats(ctx, ds, v.Table(), v.Definition.Fields()); err != nil {
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
	p, err := s.b.Indexes.GroupProgress(ctx, ds, indexes.GroupName(v.Definition.Table, v.Version), c)
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
	return s.b.Indexes.LogProgress(ctx, ds, nil)
}

// indexName reads the {index} path value. An invalid name is reported as unknown (404): it
// cannot name an index.
func indexName(r *http.Request) string { return r.PathValue("index") }

// indexAlias serves POST /v1/{ds}/indexes/{index}/alias with body {"version": N}.
func (s *Server) indexAlias(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: s.cfg.MaxIndexRequestBytes})
	if err != nil {
		return err
	}
	raw, err := q.body()
	if err != nil {
		return err
	}
	var in wire.IndexAliasRequest
	if len(bytes.TrimSpace(raw)) == 0 {
		return invalid("version", "is required")
	}
	if err := decodeBody(raw, &in, false); err != nil {
		return err
	}
	if in.Version < 1 {
		return invalid("version", "%d is not a version (1 or more)", in.Version)
	}
	name := indexName(r)
	_, err = s.b.Indexes.CatalogApply(r.Context(), q.ds, indexes.Command{Op: indexes.OpAlias, Name: name, Version: in.Version})
	s.forgetCatalog(q.ds)
	if err != nil {
		return catalogError(err)
	}
	writeJSON(w, http.StatusOK, wire.IndexAliasResult{Index: name, Alias: in.Version})
	return nil
}

// indexDrop serves DELETE /v1/{ds}/indexes/{index}/versions/{version}: the version becomes
// dropping; then its tables are dropped and it is marked dropped right away when possible
// (otherwise the maintainers finish it).
func (s *Server) indexDrop(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	ds := q.ds
	vtext := r.PathValue("version")
	version, err := strconv.Atoi(vtext)
	if err != nil || version < 1 {
		return invalid("version", "%q is not a version (1 or more)", vtext)
	}
	name := indexName(r)
	_, err = s.b.Indexes.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpDrop, Name: name, Version: version})
	s.forgetCatalog(ds)
	if err != nil {
		return catalogError(err)
	}
	out := wire.IndexDropResult{Index: name, Version: version, State: string(indexes.StateDropping)}
	table := indexes.TableName(name, version)
	if err := s.b.Indexes.DropIndexTable(r.Context(), ds, table); err != nil {
		s.cfg.Logger.Warn("api: drop index tables; the maintainers will retry", "datastore", ds, "table", table, "error", err)
	} else if _, err := s.b.Indexes.CatalogApply(r.Context(), ds, indexes.Command{Op: indexes.OpDropped, Name: name, Version: version}); err != nil {
		s.cfg.Logger.Warn("api: mark index version dropped; the maintainers will retry", "datastore", ds, "table", table, "error", err)
	} else {
		out.State = string(indexes.StateDropped)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
