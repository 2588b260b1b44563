package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/wire"
)

// SchemaBackend is what the schema routes need of a node (*cluster.Node). A Backend without
// it answers them 501 unimplemented.
type SchemaBackend interface {
	// PutSchema registers text as column's next schema version on every partition.
	PutSchema(ctx context.Context, ds, column string, text []byte) (cluster.SchemaRegistration, error)
	// DryRunSchema counts the latest cells of column text rejects (partitions pids; nil: all).
	DryRunSchema(ctx context.Context, ds, column string, text []byte, pids []int, c cluster.Consistency) (cluster.SchemaDryRun, error)
	// Schemas lists column's versions, or with column "" every column's latest.
	Schemas(ctx context.Context, ds, column string, c cluster.Consistency) ([]schemas.Version, error)
}

var _ SchemaBackend = (*cluster.Node)(nil)

// maxSchemaRequestBytes bounds the body of a schema registration: its text before white space
// is removed (schemas.MaxSchemaBytes bounds what remains).
const maxSchemaRequestBytes = 4 * schemas.MaxSchemaBytes

// schemaRoutes registers the schema routes (see docs/api.md, "Schemas"). Reads and
// registrations are bounded by RequestTimeout, inside the route's AdminTimeout, which a dry run
// (a scan of partitions) may use whole.
func (s *Server) schemaRoutes() {
	s.route("/v1/{ds}/schemas", map[string]http.HandlerFunc{http.MethodGet: s.schemaList})
	s.routeTimeout("/v1/{ds}/schemas/{col}", s.cfg.AdminTimeout, map[string]http.HandlerFunc{
		http.MethodPut: s.schemaPut,
		http.MethodGet: s.schemaVersions,
	})
}

// schemaViolation is the answer to a write refused by a schema: 400 schema_violation, its
// field naming the cell and the JSON pointer of the failing field ("cells[2].body/distance";
// put_cell's "body/distance"; where is "cells", "writes" or "" for put_cell), its message the
// version and column, and violation the details. partial says cells of other partitions of a
// put_cells were applied (the node learned of the schema after sending them).
func schemaViolation(v schemas.CellViolation, where string, partial bool) *httpError {
	field := "body" + v.Pointer
	if where != "" {
		field = fmt.Sprintf("%s[%d].%s", where, v.Cell, field)
	}
	written := "nothing was written"
	if partial {
		written = "nothing of its partition's cells was written; cells of other partitions of the request may have been written"
	}
	return &httpError{status: http.StatusBadRequest, code: wire.CodeSchemaViolation, field: field,
		msg:       fmt.Sprintf("%s: violates version %d of the schema of column %s: %s; %s", field, v.Version, v.Column, v.Message, written),
		violation: &wire.SchemaViolation{Cell: v.Cell, Column: v.Column, Version: v.Version, Pointer: v.Pointer, Message: v.Message}}
}

// anyResult reports whether some cell has a result: the cells of partitions that applied
// their share of a request another partition refused.
func anyResult(rs []cells.Result) bool {
	for _, r := range rs {
		if r.Status != 0 {
			return true
		}
	}
	return false
}

// schemaBackend returns the backend's schema operations, or answers 501.
func (s *Server) schemaBackend(w http.ResponseWriter) SchemaBackend {
	b, ok := s.backend.(SchemaBackend)
	if !ok {
		writeError(w, &httpError{status: http.StatusNotImplemented, code: wire.CodeUnimplemented, msg: "this server has no schemas"})
		return nil
	}
	return b
}

// schemaError maps the errors of registration: a bad schema is 400 naming the body, a version
// taken by another text 409; the rest as every route.
func (s *Server) schemaError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, cluster.ErrBadSchema):
		writeError(w, invalid("body", "%v", err))
	case errors.Is(err, cluster.ErrSchemaConflict):
		writeError(w, &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()})
	default:
		s.fail(w, r, err)
	}
}

// schemaColumn checks the {col} path value.
func schemaColumn(r *http.Request) (string, *httpError) {
	col := r.PathValue("col")
	if err := cells.ValidateColumnKey(col); err != nil {
		return "", fieldError("", err)
	}
	return col, nil
}

// schemaPut answers PUT /v1/{ds}/schemas/{col}[?dry_run=true[&partition=N][&consistency=]]:
// the body is a JSON Schema (draft 2020-12), registered as the column's next version on every
// partition, or with dry_run only checked against the latest cells of the column (of one
// partition with partition=N), read with the consistency asked (strong by default).
func (s *Server) schemaPut(w http.ResponseWriter, r *http.Request) {
	b := s.schemaBackend(w)
	if b == nil {
		return
	}
	ds, he := s.datastore(r)
	if he != nil {
		writeError(w, he)
		return
	}
	col, he := schemaColumn(r)
	if he != nil {
		writeError(w, he)
		return
	}
	q := r.URL.Query()
	dry := false
	switch v := q.Get("dry_run"); v {
	case "", "false":
	case "true":
		dry = true
	default:
		writeError(w, invalid("dry_run", "%q must be true or false", v))
		return
	}
	var pids []int
	if q.Has("partition") {
		if !dry {
			writeError(w, invalid("partition", "only with dry_run=true"))
			return
		}
		p, err := strconv.Atoi(q.Get("partition"))
		if err != nil || p < 0 {
			writeError(w, invalid("partition", "%q is not a partition id", q.Get("partition")))
			return
		}
		pids = []int{p}
	}
	text, he := readBody(r, maxSchemaRequestBytes, "body")
	if he != nil {
		writeError(w, he)
		return
	}
	if _, err := schemas.Compile(text); err != nil {
		writeError(w, invalid("body", "%v", err))
		return
	}
	if dry {
		c, he := consistency(r)
		if he != nil {
			writeError(w, he)
			return
		}
		res, err := b.DryRunSchema(r.Context(), ds, col, text, pids, c)
		if errors.Is(err, cluster.ErrBadShard) {
			writeError(w, invalid("partition", "%v", err))
			return
		}
		if err != nil {
			s.schemaError(w, r, err)
			return
		}
		out := wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaDryRun, DryRun: &wire.SchemaDryRunCheck{
			Partitions: res.Partitions, Rows: res.Rows, Rejected: res.Rejected, Examples: []wire.SchemaRejection{}}}
		for _, e := range res.Examples {
			out.DryRun.Examples = append(out.DryRun.Examples, wire.SchemaRejection{RowKey: e.RowKey.String(), RefKey: e.RefKey, Pointer: e.Pointer, Message: e.Message})
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	res, err := b.PutSchema(ctx, ds, col, text)
	if err != nil {
		s.schemaError(w, r, err)
		return
	}
	if res.Created {
		writeJSON(w, http.StatusCreated, wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaCreated})
		return
	}
	writeJSON(w, http.StatusOK, wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaExists})
}

// schemaVersions answers GET /v1/{ds}/schemas/{col}: every version of the column's schema
// (none when it has no schema: a column has no existence apart from its cells).
func (s *Server) schemaVersions(w http.ResponseWriter, r *http.Request) {
	col, he := schemaColumn(r)
	if he != nil {
		writeError(w, he)
		return
	}
	s.schemaRead(w, r, col)
}

// schemaList answers GET /v1/{ds}/schemas: the latest version of every column with a schema.
func (s *Server) schemaList(w http.ResponseWriter, r *http.Request) { s.schemaRead(w, r, "") }

func (s *Server) schemaRead(w http.ResponseWriter, r *http.Request, col string) {
	b := s.schemaBackend(w)
	if b == nil {
		return
	}
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
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	vs, err := b.Schemas(ctx, ds, col, c)
	if err != nil {
		s.schemaError(w, r, err)
		return
	}
	out := wire.SchemaVersions{Column: col, Versions: make([]wire.SchemaVersion, len(vs))}
	for i, v := range vs {
		out.Versions[i] = wire.SchemaVersion{Column: v.Column, Version: v.Version, CreatedAt: v.CreatedAt, Schema: v.Text}
	}
	writeJSON(w, http.StatusOK, out)
}
