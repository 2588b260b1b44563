package cells

import (
	"errors"
	"strings"
	"testing"
)

func TestParseRowKey(t *testing.T) {
	good := []string{"6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6BA7B810-9DAD-11D1-80B4-00C04FD430C8"}
	for _, s := range good {
		u, err := ParseRowKey(s)
		if err != nil {
			t.Errorf("ParseRowKey(%q) = %v, want nil", s, err)
			continue
		}
		if got := u.String(); got != strings.ToLower(s) {
			t.Errorf("ParseRowKey(%q).String() = %q, want %q", s, got, strings.ToLower(s))
		}
	}
	bad := []string{"", "x", "6ba7b8109dad11d180b400c04fd430c8", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}",
		"urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", "6ba7b810-9dad-11d1-80b4-00c04fd430cg"}
	for _, s := range bad {
		_, err := ParseRowKey(s)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "row_key" || !errors.Is(err, ErrInvalidRowKey) {
			t.Errorf("ParseRowKey(%q) = %v, want a row_key FieldError", s, err)
		}
	}
}

func TestValidateColumnKey(t *testing.T) {
	for _, s := range []string{"BASE", "a", "status_2", strings.Repeat("Z", 64)} {
		if err := ValidateColumnKey(s); err != nil {
			t.Errorf("ValidateColumnKey(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", strings.Repeat("Z", 65), "a-b", "a b", "é", "a/b", "a.b"} {
		if err := ValidateColumnKey(s); !errors.Is(err, ErrInvalidColumnKey) {
			t.Errorf("ValidateColumnKey(%q) = %v, want ErrInvalidColumnKey", s, err)
		}
	}
}

func TestKeyValidate(t *testing.T) {
	k := Key{ColumnKey: "BASE", RefKey: 0}
	if err := k.Validate(); err != nil {
		t.Errorf("Validate(%v) = %v, want nil", k, err)
	}
	k.RefKey = -1
	var fe *FieldError
	if err := k.Validate(); !errors.As(err, &fe) || fe.Field != "ref_key" {
		t.Errorf("Validate(ref_key -1) = %v, want a ref_key FieldError", err)
	}
	k = Key{ColumnKey: "no-dash"}
	if err := k.Validate(); !errors.As(err, &fe) || fe.Field != "column_key" {
		t.Errorf("Validate(column_key no-dash) = %v, want a column_key FieldError", err)
	}
}
