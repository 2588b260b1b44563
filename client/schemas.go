package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// checkSchemaArgs refuses an invalid column key or an empty schema before sending.
func checkSchemaArgs(op, column string, schema json.RawMessage, needSchema bool) error {
	if err := cells.ValidateColumnKey(column); err != nil {
		return invalid(op, "", err)
	}
	if needSchema && len(bytes.TrimSpace(schema)) == 0 {
		return invalid(op, "", &cells.FieldError{Field: "schema", Err: errorString("empty")})
	}
	return nil
}

// PutSchema registers schema, a JSON Schema (draft 2020-12) given as a JSON object, as the next
// version of column's schema (PUT /v1/{ds}/schemas/{column_key}); from then on, writes whose
// cells of the column violate it are refused (ErrSchemaViolation). The same schema as the
// column's latest version (white space aside) answers that version with Status
// wire.SchemaExists and registers nothing; a registration that failed part-way is completed
// by calling again. It is retried as a write: registering is idempotent.
//
// With dryRun nothing is registered: the answer (Status wire.SchemaDryRun) counts the rows
// whose latest cell of the column the schema would reject, over every partition (a scan of
// the datastore with Config.Consistency, bounded by ctx alone: see DryRunSchemaPartition to go
// one partition at a time), and it is retried as a read.
//
// Errors: ErrInvalidArgument (a bad column key, or the schema is not a JSON object, names
// another draft, refers outside itself or does not compile: the *APIError says why, field
// "body"); ErrConflict (a concurrent registration took the version); ErrTooLarge;
// ErrNotFound (no such datastore); ErrUnavailable (a partition has no leader, or in async
// mode no master); ErrIndeterminate; ErrInternal; ErrBadResponse; ctx's error.
func (c *Client) PutSchema(ctx context.Context, column string, schema json.RawMessage, dryRun bool) (wire.SchemaResult, error) {
	return c.putSchema(ctx, column, schema, dryRun, -1, "")
}

// PutSchemaFrom is PutSchema (never a dry run) of a schema version first registered in cluster
// origin (replication between clusters: PUT ...?origin=): the principal needs the replicator
// or admin role. An origin that is not a valid cluster name fails the call with
// ErrInvalidArgument (Field "origin"), unsent. Other errors as PutSchema's.
func (c *Client) PutSchemaFrom(ctx context.Context, column string, schema json.RawMessage, origin string) (wire.SchemaResult, error) {
	if err := cells.ValidateClusterName("origin", origin); err != nil {
		return wire.SchemaResult{}, invalid("put_schema", "", err)
	}
	return c.putSchema(ctx, column, schema, false, -1, origin)
}

// DryRunSchemaPartition is PutSchema's dry run over partition pid alone (an id of
// wire.DatastoreStatus.Partitions, see Cluster), so that a caller can show progress over a
// large datastore. ErrInvalidArgument also for a partition the datastore does not have.
func (c *Client) DryRunSchemaPartition(ctx context.Context, column string, schema json.RawMessage, pid int) (wire.SchemaResult, error) {
	if pid < 0 {
		return wire.SchemaResult{}, invalid("dry_run_schema", "", &cells.FieldError{Field: "partition", Err: errorString("must be 0 or more")})
	}
	return c.putSchema(ctx, column, schema, true, pid, "")
}

func (c *Client) putSchema(ctx context.Context, column string, schema json.RawMessage, dryRun bool, pid int, origin string) (wire.SchemaResult, error) {
	op := "put_schema"
	if dryRun {
		op = "dry_run_schema"
	}
	if err := c.checkDatastore(op); err != nil {
		return wire.SchemaResult{}, err
	}
	if err := checkSchemaArgs(op, column, schema, true); err != nil {
		return wire.SchemaResult{}, err
	}
	r := &request{op: op, method: http.MethodPut, path: c.dsPath("schemas", column), body: schema,
		write: !dryRun, ok: []int{http.StatusCreated, http.StatusOK}}
	if dryRun {
		q, err := c.readQuery(op, nil)
		if err != nil {
			return wire.SchemaResult{}, err
		}
		r.query = q
		r.query.Set("dry_run", "true")
		if pid >= 0 {
			r.query.Set("partition", strconv.Itoa(pid))
		}
		r.timeout = -1 // a scan: ctx alone bounds it
	}
	if origin != "" {
		r.query = url.Values{"origin": {origin}}
	}
	ans, err := c.do(ctx, r)
	if err != nil {
		return wire.SchemaResult{}, err
	}
	var res wire.SchemaResult
	if err := decode(op, ans, &res); err != nil {
		return wire.SchemaResult{}, err
	}
	if res.Column != column || res.Version < 1 {
		return wire.SchemaResult{}, badResponse(op, ans, "column %q version %d for column %q", res.Column, res.Version, column)
	}
	want := wire.SchemaExists
	switch {
	case dryRun:
		want = wire.SchemaDryRun
		if res.DryRun == nil {
			return wire.SchemaResult{}, badResponse(op, ans, "a dry run without its findings")
		}
	case ans.status == http.StatusCreated:
		want = wire.SchemaCreated
	}
	if res.Status != want {
		return wire.SchemaResult{}, badResponse(op, ans, "status %q with HTTP %d, want %q", res.Status, ans.status, want)
	}
	return res, nil
}

// Schemas reads the datastore's schemas (GET /v1/{ds}/schemas/{column_key}): every version of
// column, oldest first, none when it has no schema; with column "" (GET /v1/{ds}/schemas) the
// latest version of every column that has one, by column. It is retried as a read. Errors:
// ErrInvalidArgument (a bad column key), ErrNotFound (no such datastore), ErrUnavailable,
// ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) Schemas(ctx context.Context, column string, opts ...ReadOption) (wire.SchemaVersions, error) {
	const op = "schemas"
	if err := c.checkDatastore(op); err != nil {
		return wire.SchemaVersions{}, err
	}
	path := c.dsPath("schemas")
	if column != "" {
		if err := checkSchemaArgs(op, column, nil, false); err != nil {
			return wire.SchemaVersions{}, err
		}
		path = c.dsPath("schemas", column)
	}
	q, err := c.readQuery(op, opts)
	if err != nil {
		return wire.SchemaVersions{}, err
	}
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, path: path, query: q, ok: []int{http.StatusOK}})
	if err != nil {
		return wire.SchemaVersions{}, err
	}
	var res wire.SchemaVersions
	if err := decode(op, ans, &res); err != nil {
		return wire.SchemaVersions{}, err
	}
	if res.Column != column {
		return wire.SchemaVersions{}, badResponse(op, ans, "versions of column %q for column %q", res.Column, column)
	}
	if res.Versions == nil {
		res.Versions = []wire.SchemaVersion{}
	}
	return res, nil
}

// DryRunSchemaByPartition is PutSchema's dry run one partition at a time
// (DryRunSchemaPartition over the datastore's partitions as Cluster lists them), summed into
// one result: Rows and Rejected added up, Examples and Partitions appended in partition order.
// progress, when not nil, is called before each partition and once after the last with the
// partitions done, their count and the sum so far. It fails like DryRunSchemaPartition,
// naming the partition, and with ErrNotFound when the cluster's status lists no partition of
// the datastore.
func (c *Client) DryRunSchemaByPartition(ctx context.Context, column string, schema json.RawMessage,
	progress func(done, all int, sum wire.SchemaDryRunCheck)) (wire.SchemaResult, error) {
	st, err := c.Cluster(ctx)
	if err != nil {
		return wire.SchemaResult{}, err
	}
	var parts []int
	for _, d := range st.Datastores {
		if d.Name == c.Datastore() {
			for _, p := range d.Partitions {
				parts = append(parts, p.ID)
			}
		}
	}
	if len(parts) == 0 {
		return wire.SchemaResult{}, fmt.Errorf("client: datastore %q: no partitions in the cluster's status: %w", c.Datastore(), ErrNotFound)
	}
	total := wire.SchemaResult{DryRun: &wire.SchemaDryRunCheck{}}
	for i, pid := range parts {
		if progress != nil {
			progress(i, len(parts), *total.DryRun)
		}
		res, err := c.DryRunSchemaPartition(ctx, column, schema, pid)
		if err != nil {
			return wire.SchemaResult{}, fmt.Errorf("partition %d: %w", pid, err)
		}
		total.Column, total.Version, total.Status = res.Column, res.Version, res.Status
		d := total.DryRun
		d.Partitions = append(d.Partitions, pid)
		if res.DryRun != nil {
			d.Rows += res.DryRun.Rows
			d.Rejected += res.DryRun.Rejected
			d.Examples = append(d.Examples, res.DryRun.Examples...)
		}
	}
	if progress != nil {
		progress(len(parts), len(parts), *total.DryRun)
	}
	return total, nil
}
