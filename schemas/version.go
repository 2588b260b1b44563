package schemas

import "time"

// MaxVersion is the highest version a column's schema may reach (versions are written with 8
// digits in the keys that store them).
const MaxVersion = 99_999_999

// Version is one registered version of a column's schema, as a partition holds it: its
// canonical text (Canonical) and the time the partition applied it (the proposer's clock,
// UTC).
type Version struct {
	Column    string
	Version   int
	CreatedAt time.Time
	Text      []byte
}

// CellViolation says which cell of a write the latest schema of its column rejected: its index
// in the write's cells, the column, the schema version, the JSON pointer of the failing field
// in the body ("" for the whole body) and the validator's message (Violation).
type CellViolation struct {
	Cell    int
	Column  string
	Version int
	Pointer string
	Message string
}
