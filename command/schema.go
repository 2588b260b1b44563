package command

import (
	"strconv"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// Schema is a schema command: register version Version of the schema of column Column, whose
// canonical text (schemas.Canonical) is Text. CreatedAt is the proposer's clock (the version's
// created_at on this partition).
//
// The partition accepts it (SchemaCreated) when Version is its latest version of the column
// plus one, answers SchemaExists when it holds Version with the same text, SchemaConflict
// when it holds Version with another text, and SchemaGap when Version is beyond latest + 1
// (an earlier version is missing: register it first). A text that does not compile, or is not
// canonical, is SchemaInvalid. Every replica decides alike; only SchemaCreated changes state.
type Schema struct {
	_msgpack  struct{} `msgpack:",as_array"`
	CreatedAt time.Time
	Column    string
	Version   int
	Text      []byte
}

func (*Schema) isCommand() {}

// CheckShards returns nil: a schema names no shard.
func (*Schema) CheckShards(cells.ShardRange) error { return nil }

// SchemaStatus is the outcome of a Schema command.
type SchemaStatus uint8

// Outcomes of a Schema command (see Schema).
const (
	SchemaCreated SchemaStatus = iota + 1
	SchemaExists
	SchemaConflict
	SchemaGap
	SchemaInvalid
)

// String returns "created", "exists", "conflict", "gap" or "invalid".
func (s SchemaStatus) String() string {
	switch s {
	case SchemaCreated:
		return "created"
	case SchemaExists:
		return "exists"
	case SchemaConflict:
		return "conflict"
	case SchemaGap:
		return "gap"
	case SchemaInvalid:
		return "invalid"
	}
	return "unknown(" + strconv.Itoa(int(s)) + ")"
}

// SchemaResult is the outcome of a Schema command on one partition: Status, the column's
// latest version there once the command is applied (0: none), and for SchemaInvalid why.
type SchemaResult struct {
	Status  SchemaStatus
	Latest  int
	Message string
}
