package cells

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Limits on keys. They are part of the data model and not configurable: a column key is an
// identifier, not data.
const (
	// MaxColumnKeyLen is the longest column key, in bytes.
	MaxColumnKeyLen = 64
	// MaxClusterNameLen is the longest cluster name, in bytes (Cell.Origin, ValidateClusterName).
	MaxClusterNameLen = 32
)

// Errors returned by validation. Each is wrapped in a *FieldError naming the field at fault.
var (
	// ErrInvalidRowKey: the row key is not a UUID in its canonical 36-character form.
	ErrInvalidRowKey = errors.New("cells: row key is not a UUID")
	// ErrInvalidColumnKey: the column key is outside [A-Za-z0-9_]{1,64}.
	ErrInvalidColumnKey = errors.New("cells: column key must match [A-Za-z0-9_]{1,64}")
	// ErrInvalidRefKey: the ref key is negative or not an integer.
	ErrInvalidRefKey = errors.New("cells: ref key must be a non-negative 64-bit integer")
	// ErrInvalidBody: the body is not a JSON object.
	ErrInvalidBody = errors.New("cells: body must be a JSON object")
	// ErrLossyBody: the body's text would be stored as another value than it holds: it has
	// invalid UTF-8, a \u escape of half a UTF-16 surrogate pair outside a pair, or a key given
	// twice in one object. The wrapping error says which, and where.
	ErrLossyBody = errors.New("cells: body would not be stored as sent")
	// ErrInvalidClusterName: a cluster name (a cell's origin) is outside [a-z][a-z0-9-]{0,31}.
	ErrInvalidClusterName = errors.New("cells: cluster name must match [a-z][a-z0-9-]{0,31}")
)

// FieldError says which field of a request failed validation and why. Field is the JSON name of
// the field ("row_key", "column_key", "ref_key", "body"), prefixed by the caller with a position
// when the field belongs to an element of a batch ("cells[3].ref_key").
type FieldError struct {
	Field string
	Err   error
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the sentinel error, so errors.Is(err, ErrInvalidRefKey) works.
func (e *FieldError) Unwrap() error { return e.Err }

// Key addresses one cell. The zero Key is not valid (its column key is empty).
type Key struct {
	RowKey    uuid.UUID
	ColumnKey string
	RefKey    int64
}

// String renders the key as "row_key/column_key/ref_key", the shape of the HTTP path.
func (k Key) String() string {
	return fmt.Sprintf("%s/%s/%d", k.RowKey, k.ColumnKey, k.RefKey)
}

// Validate reports the first field of k that breaks the data model, as a *FieldError.
func (k Key) Validate() error {
	if err := ValidateColumnKey(k.ColumnKey); err != nil {
		return err
	}
	if k.RefKey < 0 {
		return &FieldError{Field: "ref_key", Err: ErrInvalidRefKey}
	}
	return nil
}

// Cell is one immutable cell as stored. Body holds the encoded body (see EncodeBody); AddedID and
// CreatedAt are assigned when the cell is applied to its shard and are zero before.
type Cell struct {
	Key
	// Body is the stored form of the JSON object: MessagePack with sorted map keys, then zlib.
	Body Body
	// AddedID is the cell's position in its shard's log: strictly increasing within a shard and
	// identical on every replica. Zero until the cell is applied.
	AddedID int64
	// CreatedAt is the time the write was accepted by the partition leader (raft mode), in UTC
	// with microsecond precision. Zero until the cell is applied.
	CreatedAt time.Time
	// Origin is the name of the cluster the cell was first written in when that is another
	// cluster than the one storing it (it arrived by replication between clusters), and empty
	// for a cell a client wrote in this cluster. It is stored with the cell, identical on every
	// replica, and never changes; see ValidateClusterName for its form.
	Origin string
}

// ValidateClusterName reports whether name is a valid cluster name: 1 to MaxClusterNameLen
// bytes of [a-z0-9-], starting with a letter. The error is a *FieldError for field wrapping
// ErrInvalidClusterName.
func ValidateClusterName(field, name string) error {
	if name == "" || len(name) > MaxClusterNameLen || name[0] < 'a' || name[0] > 'z' {
		return &FieldError{Field: field, Err: ErrInvalidClusterName}
	}
	for i := 1; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return &FieldError{Field: field, Err: ErrInvalidClusterName}
		}
	}
	return nil
}

// ParseRowKey parses a row key in the canonical textual form of a UUID
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, either case). Other forms that uuid.Parse accepts
// (braces, urn:uuid:, no hyphens) are rejected, so one row key has one spelling in URLs.
func ParseRowKey(s string) (uuid.UUID, error) {
	if len(s) != 36 {
		return uuid.Nil, &FieldError{Field: "row_key", Err: ErrInvalidRowKey}
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, &FieldError{Field: "row_key", Err: ErrInvalidRowKey}
	}
	return u, nil
}

// ValidateColumnKey checks that s matches [A-Za-z0-9_]{1,64}.
func ValidateColumnKey(s string) error {
	if len(s) == 0 || len(s) > MaxColumnKeyLen {
		return &FieldError{Field: "column_key", Err: ErrInvalidColumnKey}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return &FieldError{Field: "column_key", Err: ErrInvalidColumnKey}
		}
	}
	return nil
}
