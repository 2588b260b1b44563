// Package api serves the datastore's HTTP API: the Schemaless operations (put_cell, put_cells,
// get_cell, get_cell_latest, the row read, the batch get, get_cells_for_shard) over JSON, the
// consumer-group commands, secondary indexes (define, list, alias, drop, query; indexes.go),
// plus health, readiness and cluster status. It validates every request completely before anything
// is written and maps the node's errors to HTTP statuses.
//
// Routes, bodies and errors are documented in docs/api.md; package wire holds the JSON shapes,
// which package client shares.
//
// # Structure
//
// The server consumes a node through small interfaces, one per route group (backends.go:
// NodeBackend, CellReader, CellWriter, LogReader, GroupBackend, IndexBackend, SchemaBackend,
// AdminBackend, BackupBackend, CatalogBackend, LeaderHinter), given together as Backends;
// *cluster.Node implements them all. A route group whose part is nil is not registered, or
// answers 501.
//
// Before routing, ServeHTTP refuses what cannot be served as sent (strict.go: dot and empty
// path segments on every path, bad UTF-8, unknown query parameters), bounds the body's arrival
// (bodytimeout.go), authenticates (auth.go) and counts the request in flight (limits.go). Each
// handler returns an error instead of writing it (handler.go): the route's adapter answers it
// in the error envelope, maps the node's errors (errors.go) and logs internal ones. The
// handlers under /v1/{ds}/ begin with Server.parse (parse.go), which checks the datastore and
// reads the Idempotency-Key header and the body with its limit. Files follow the routes:
// reads.go, putcell.go, writes.go (put_cells and what every write shares), transactions.go,
// erase.go, rowkeys.go, logs.go, groups.go, indexes.go, indexquery.go, schemas.go, admin.go,
// datastores.go (the catalog's datastores, /v1/admin/datastores), split.go (a partition's
// split), merge.go (the merge of two), backup.go, status.go, console.go.
//
// # Errors
//
// Every error is {"error":{"code","message","field"}}: 400 invalid_argument (field names the
// request field, with the cell's position in a batch: "cells[3].ref_key"), 404 not_found (also an
// unknown datastore, index or route), 405 method_not_allowed, 409 conflict (also an index
// version not ready, a refused catalog change), 413 too_large, 503
// unavailable with Retry-After (nothing was done; retry), 504 indeterminate (a write that may
// still commit; retrying is safe), 500 internal. A rejected request writes nothing.
package api
