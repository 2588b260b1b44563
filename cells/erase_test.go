package cells

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A tombstone's column key is one no client can write: validation refuses it, so a tombstone is
// never mistaken for a cell.
func TestTombstone(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, ValidateColumnKey(TombstoneColumn), ErrInvalidColumnKey, "ValidateColumnKey(%q)", TombstoneColumn)
	rk := uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	at := time.Date(2026, 11, 27, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	ts := NewTombstone(rk, 42, at)
	assertFieldError(t, ts.Key.Validate(), "column_key", "Validate(tombstone key)")
	assert.True(t, ts.Key.IsTombstone(), "IsTombstone of %s", ts.Key)
	assert.False(t, Key{RowKey: rk, ColumnKey: "BASE", RefKey: 42}.IsTombstone(), "IsTombstone of a cell key")
	assert.Equal(t, Key{RowKey: rk, ColumnKey: TombstoneColumn, RefKey: 42}, ts.Key, "key: the row's, ref key the added_id")
	assert.EqualValues(t, 42, ts.AddedID, "added_id")
	assert.True(t, ts.CreatedAt.Equal(at) && ts.CreatedAt.Location() == time.UTC, "created_at %s, want %s in UTC", ts.CreatedAt, at)
	j, err := ts.Body.JSON()
	require.NoError(t, err, "tombstone body")
	assert.Equal(t, "{}", string(j), "tombstone body")
}
