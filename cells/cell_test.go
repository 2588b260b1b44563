package cells

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseRowKey(t *testing.T) {
	t.Parallel()
	good := []string{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"}
	for _, s := range good {
		u, err := ParseRowKey(s)
		if assert.NoError(t, err, "ParseRowKey(%q)", s) {
			assert.Equal(t, strings.ToLower(s), u.String(), "ParseRowKey(%q).String()", s)
		}
	}
	bad := []string{"", "x", "6ba7b8109dad11d180b400c04fd430c8", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
		"urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430cg"}
	for _, s := range bad {
		_, err := ParseRowKey(s)
		assert.ErrorIs(t, err, ErrInvalidRowKey, "ParseRowKey(%q)", s)
		assertFieldError(t, err, "row_key", "ParseRowKey(%q)", s)
	}
}

// assertFieldError checks that err is a *FieldError naming field; what says which call gave err.
func assertFieldError(t *testing.T, err error, field string, what string, args ...any) {
	t.Helper()
	var fe *FieldError
	if assert.ErrorAs(t, err, &fe, append([]any{what + ": want a FieldError"}, args...)...) {
		assert.Equal(t, field, fe.Field, append([]any{what + ": field of the FieldError"}, args...)...)
	}
}

func TestValidateColumnKey(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"BASE", "a", "status_2", strings.Repeat("Z", 64)} {
		assert.NoError(t, ValidateColumnKey(s), "ValidateColumnKey(%q)", s)
	}
	for _, s := range []string{"", strings.Repeat("Z", 65), "a-b", "a b", "é", "a/b", "a.b"} {
		assert.ErrorIs(t, ValidateColumnKey(s), ErrInvalidColumnKey, "ValidateColumnKey(%q)", s)
	}
}

func TestKeyValidate(t *testing.T) {
	t.Parallel()
	k := Key{ColumnKey: "BASE", RefKey: 0}
	assert.NoError(t, k.Validate(), "Validate(%v)", k)
	k.RefKey = -1
	assertFieldError(t, k.Validate(), "ref_key", "Validate(ref_key -1)")
	k = Key{ColumnKey: "no-dash"}
	assertFieldError(t, k.Validate(), "column_key", "Validate(column_key no-dash)")
}
