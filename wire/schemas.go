package wire

import (
	"encoding/json"
	"time"
)

// Statuses of a SchemaResult.
const (
	// SchemaCreated: the schema was registered as a new version (HTTP 201).
	SchemaCreated = "created"
	// SchemaExists: the column's latest version holds the same schema (after removing white
	// space); nothing new was registered, and every partition holds that version (HTTP 200).
	SchemaExists = "exists"
	// SchemaDryRun: nothing was registered; DryRun says what the schema would reject (HTTP 200).
	SchemaDryRun = "dry_run"
)

// SchemaViolation details a schema_violation (CodeSchemaViolation, ErrorDetail.Violation): the
// cell of the write that its column's schema rejects, its index in the request (0 for
// put_cell), the column, the schema version, the JSON pointer (RFC 6901) of the
// failing field in the body ("" for the body itself; for a missing required field, that field)
// and the validator's message.
type SchemaViolation struct {
	Cell    int    `json:"cell"`
	Column  string `json:"column"`
	Version int    `json:"version"`
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// SchemaResult answers PUT /v1/{ds}/schemas/{column_key}: the column, the version that holds
// the schema (for a dry run, the version it would get), Status (SchemaCreated, SchemaExists
// or SchemaDryRun) and, for a dry run, its findings.
type SchemaResult struct {
	Column  string             `json:"column"`
	Version int                `json:"version"`
	Status  string             `json:"status"`
	DryRun  *SchemaDryRunCheck `json:"dry_run,omitempty"`
}

// SchemaDryRunCheck is what a dry run found on the partitions it read (Partitions, by id):
// Rows is the number of rows with a cell of the column (the latest cell of each was checked),
// Rejected how many of those cells the schema rejects, Examples up to 10 of them, by row key.
// Partitions are read with the request's consistency (strong by default; stale spares the
// leaders and may miss the last writes).
type SchemaDryRunCheck struct {
	Partitions []int             `json:"partitions"`
	Rows       int64             `json:"rows"`
	Rejected   int64             `json:"rejected"`
	Examples   []SchemaRejection `json:"examples"`
}

// SchemaRejection is a latest cell a dry run's schema rejects, and why.
type SchemaRejection struct {
	RowKey  string `json:"row_key"`
	RefKey  int64  `json:"ref_key"`
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// SchemaVersions answers GET /v1/{ds}/schemas/{column_key} (Column set: every version of the
// column, ascending; none when it has no schema) and GET /v1/{ds}/schemas (Column empty: the
// latest version of every column with a schema, by column).
type SchemaVersions struct {
	Column   string          `json:"column,omitempty"`
	Versions []SchemaVersion `json:"versions"`
}

// SchemaVersion is one registered version of a column's schema: CreatedAt is when the
// partition holding shard 0 registered it (UTC), Schema its text without insignificant white
// space.
type SchemaVersion struct {
	Column    string          `json:"column"`
	Version   int             `json:"version"`
	CreatedAt time.Time       `json:"created_at"`
	Schema    json.RawMessage `json:"schema"`
}
