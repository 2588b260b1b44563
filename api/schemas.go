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

// maxSchemaRequestBytes bounds the body of a schema registration: its text before white space
// is removed (schemas.MaxSchemaBytes bounds what remains).
const maxSchemaRequestBytes = 4 * schemas.MaxSchemaBytes

// schemaRoutes registers the schema routes (see docs/api.md, "Schemas"). Reads and
// registrations are bounded by RequestTimeout, inside the route's AdminTimeout, which a dry run
// (a scan of partitions) may use whole. Without a SchemaBackend they answer 501 unimplemented.
func (s *Server) schemaRoutes() {
	list := handlers{http.MethodGet: s.schemaList}
	col := handlers{http.MethodPut: s.schemaPut, http.MethodGet: s.schemaVersions}
	if s.b.Schemas == nil {
		list = unimplemented(list, wire.CodeUnimplemented, "this server has no schemas")
		col = unimplemented(col, wire.CodeUnimplemented, "this server has no schemas")
	}
	s.route("/v1/{ds}/schemas", list)
	s.routeTimeout("/v1/{ds}/schemas/{col}", s.cfg.AdminTimeout, col)
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

// schemaError maps the errors of registration: a bad schema is 400 naming the body, a version
// taken by another text 409; the rest as every route.
func schemaError(err error) error {
	switch {
	case errors.Is(err, cluster.ErrBadSchema):
		return invalid("body", "%v", err)
	case errors.Is(err, cluster.ErrSchemaConflict):
		return &httpError{status: http.StatusConflict, code: wire.CodeConflict, msg: err.Error()}
	}
	return err
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
// ?origin=C marks a version replicated from cluster C (the replicator role suffices, see
// routeRole; registered like any other; not with dry_run: 400 naming origin).
func (s *Server) schemaPut(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: maxSchemaRequestBytes})
	if err != nil {
		return err
	}
	col, he := schemaColumn(r)
	if he != nil {
		return he
	}
	query := r.URL.Query()
	dry := false
	switch v := query.Get("dry_run"); v {
	case "", "false":
	case "true":
		dry = true
	default:
		return invalid("dry_run", "%q must be true or false", v)
	}
	origin := query.Get("origin")
	if query.Has("origin") {
		if dry {
			return invalid("origin", "only without dry_run")
		}
		if err := cells.ValidateClusterName("origin", origin); err != nil {
			return invalid("origin", "%q must be 1 to %d bytes of [a-z0-9-], starting with a letter", origin, cells.MaxClusterNameLen)
		}
	}
	var pids []int
	if query.Has("partition") {
		if !dry {
			return invalid("partition", "only with dry_run=true")
		}
		p, err := strconv.Atoi(query.Get("partition"))
		if err != nil || p < 0 {
			return invalid("partition", "%q is not a partition id", query.Get("partition"))
		}
		pids = []int{p}
	}
	text, err := q.body()
	if err != nil {
		return err
	}
	if _, err := schemas.Compile(text); err != nil {
		return invalid("body", "%v", err)
	}
	if dry {
		return s.schemaDryRun(w, r, q.ds, col, text, pids)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.b.Schemas.PutSchema(ctx, q.ds, col, text)
	if err != nil {
		return schemaError(err)
	}
	if res.Created {
		writeJSON(w, http.StatusCreated, wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaCreated})
		return nil
	}
	writeJSON(w, http.StatusOK, wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaExists})
	return nil
}

// schemaDryRun answers schemaPut with dry_run=true: the latest cells of column col that text
// rejects, in partitions pids (nil: all).
func (s *Server) schemaDryRun(w http.ResponseWriter, r *http.Request, ds, col string, text []byte, pids []int) error {
	c, he := consistency(r)
	if he != nil {
		return he
	}
	res, err := s.b.Schemas.DryRunSchema(r.Context(), ds, col, text, pids, c)
	if errors.Is(err, cluster.ErrBadShard) {
		return invalid("partition", "%v", err)
	}
	if err != nil {
		return schemaError(err)
	}
	out := wire.SchemaResult{Column: res.Column, Version: res.Version, Status: wire.SchemaDryRun, DryRun: &wire.SchemaDryRunCheck{
		Partitions: res.Partitions, Rows: res.Rows, Rejected: res.Rejected, Examples: []wire.SchemaRejection{}}}
	for _, e := range res.Examples {
		out.DryRun.Examples = append(out.DryRun.Examples, wire.SchemaRejection{RowKey: e.RowKey.String(), RefKey: e.RefKey, Pointer: e.Pointer, Message: e.Message})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// schemaVersions answers GET /v1/{ds}/schemas/{col}: every version of the column's schema
// (none when it has no schema: a column has no existence apart from its cells).
func (s *Server) schemaVersions(w http.ResponseWriter, r *http.Request) error {
	col, he := schemaColumn(r)
	if he != nil {
		return he
	}
	return s.schemaRead(w, r, col)
}

// schemaList answers GET /v1/{ds}/schemas: the latest version of every column with a schema.
func (s *Server) schemaList(w http.ResponseWriter, r *http.Request) error {
	return s.schemaRead(w, r, "")
}

func (s *Server) schemaRead(w http.ResponseWriter, r *http.Request, col string) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	vs, err := s.b.Schemas.Schemas(ctx, q.ds, col, c)
	if err != nil {
		return schemaError(err)
	}
	out := wire.SchemaVersions{Column: col, Versions: make([]wire.SchemaVersion, len(vs))}
	for i, v := range vs {
		out.Versions[i] = wire.SchemaVersion{Column: v.Column, Version: v.Version, CreatedAt: v.CreatedAt, Schema: v.Text}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
