// Package api serves the datastore's HTTP API: the Schemaless operations (put_cell, put_cells,
// get_cell, get_cell_latest, the row read, the batch get, get_cells_for_shard) over JSON, the
// consumer-group commands, secondary indexes (define, list, alias, drop, query; indexes.go),
// plus health, readiness and cluster status. It validates every request completely before anything
// is written and maps the node's errors to HTTP statuses.
//
// Routes, bodies and errors are documented in docs/api.md; wire.go holds the JSON shapes, which
// package client shares.
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
