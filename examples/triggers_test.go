package examples

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeBase turns JSON text into a body object the way a trigger handler sees it: stored form
// (cells.EncodeBody), then cells.Body.Object.
func decodeBase(t *testing.T, text string) map[string]any {
	t.Helper()
	b, err := cells.EncodeBody([]byte(text))
	require.NoError(t, err, "EncodeBody(%s)", text)
	obj, err := b.Object()
	require.NoError(t, err, "Object(%s)", text)
	return obj
}

func TestBillingBody(t *testing.T) {
	tests := []struct {
		base    string
		want    string
		wantErr bool
	}{
		{base: `{"distance":0,"delay":0}`, want: `{"state":"billed","distance_miles":0,"fare_cents":2500,"fare_usd":25.00}`},
		{base: `{"distance":1,"delay":5}`, want: `{"state":"billed","distance_miles":1,"fare_cents":2511,"fare_usd":25.11}`},
		{base: `{"distance":215,"delay":19}`, want: `{"state":"billed","distance_miles":215,"fare_cents":4865,"fare_usd":48.65}`},
		{base: `{"distance":2176,"delay":33,"origin":"LAS"}`, want: `{"state":"billed","distance_miles":2176,"fare_cents":26436,"fare_usd":264.36}`},
		{base: `{"distance":70000}`, want: `{"state":"billed","distance_miles":70000,"fare_cents":772500,"fare_usd":7725.00}`},
		{base: `{"distance":-1}`, wantErr: true},
		{base: `{"distance":"215"}`, wantErr: true},
		{base: `{"distance":215.5}`, wantErr: true},
		{base: `{"delay":3}`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := BillingBody(decodeBase(t, tt.base))
		if tt.wantErr {
			assert.Error(t, err, "BillingBody(%s) = %s, want an error", tt.base, got)
			continue
		}
		if !assert.NoError(t, err, "BillingBody(%s)", tt.base) {
			continue
		}
		assert.Equal(t, tt.want, string(got), "BillingBody(%s)", tt.base)
		// Deterministic: a redelivery computes the same bytes.
		again, _ := BillingBody(decodeBase(t, tt.base))
		assert.Equal(t, string(got), string(again), "BillingBody(%s) twice", tt.base)
	}
}

func TestCompensationBody(t *testing.T) {
	tests := []struct {
		base      string
		wantWrite bool
		want      string
		wantErr   bool
	}{
		{base: `{"delay":-13,"distance":2345}`},
		{base: `{"delay":0}`},
		{base: `{"delay":59}`},
		{base: `{"delay":60}`}, // the threshold itself: no credit
		{base: `{"delay":61}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":61,"credit_cents":2500,"credit_usd":25.00}`},
		{base: `{"delay":120}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":120,"credit_cents":2500,"credit_usd":25.00}`},
		{base: `{"delay":121}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":121,"credit_cents":5000,"credit_usd":50.00}`},
		{base: `{"delay":180}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":180,"credit_cents":5000,"credit_usd":50.00}`},
		{base: `{"delay":181}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":181,"credit_cents":10000,"credit_usd":100.00}`},
		{base: `{"delay":1500,"distance":3}`, wantWrite: true, want: `{"reason":"arrival_delay","delay_minutes":1500,"credit_cents":10000,"credit_usd":100.00}`},
		{base: `{"distance":100}`}, // no delay known: no credit
		{base: `{"delay":"75"}`, wantErr: true},
		{base: `{"delay":null}`, wantErr: true},
		{base: `{"delay":61.5}`, wantErr: true},
	}
	for _, tt := range tests {
		got, write, err := CompensationBody(decodeBase(t, tt.base))
		if tt.wantErr {
			assert.Error(t, err, "CompensationBody(%s) = %s, %t, want an error", tt.base, got, write)
			continue
		}
		if !assert.NoError(t, err, "CompensationBody(%s)", tt.base) {
			continue
		}
		assert.Equal(t, tt.wantWrite, write, "CompensationBody(%s) writes", tt.base)
		assert.Equal(t, tt.want, string(got), "CompensationBody(%s)", tt.base)
	}
}

// TestDerivedBodiesStoreStably checks that the derived bodies are valid cell bodies whose stored
// form is the same on every computation, so a second write of one answers "exists".
func TestDerivedBodiesStoreStably(t *testing.T) {
	for _, base := range []string{`{"distance":2176,"delay":33}`, `{"distance":405,"delay":240}`} {
		s1, err := BillingBody(decodeBase(t, base))
		require.NoError(t, err)
		s2, _ := BillingBody(decodeBase(t, base))
		a1, _, _ := CompensationBody(decodeBase(t, base))
		a2, _, _ := CompensationBody(decodeBase(t, base))
		for _, pair := range [][2][]byte{{s1, s2}, {a1, a2}} {
			if pair[0] == nil {
				continue
			}
			b1, err := cells.EncodeBody(pair[0])
			require.NoError(t, err, "EncodeBody(%s)", pair[0])
			b2, err := cells.EncodeBody(pair[1])
			require.NoError(t, err, "EncodeBody(%s)", pair[1])
			same, err := cells.SameBody(b1, b2)
			assert.NoError(t, err)
			assert.True(t, same, "bodies of %s: %s and %s store differently", base, pair[0], pair[1])
		}
	}
}

// A tombstone (an erased row, delivered to a group of BASE cells too) calls for no write, and
// is no error: the group neither writes a cell back into the erased row nor parks the tombstone.
func TestTriggersSkipTombstones(t *testing.T) {
	ts := cells.NewTombstone(uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8"), 7, time.Now())
	for _, tr := range NewTriggers(nil) {
		w, ok, err := tr.derived(ts)
		assert.NoError(t, err, "%s: derived(tombstone)", tr.Group)
		assert.False(t, ok, "%s: derived(tombstone) = %+v, want no write", tr.Group, w)
	}
}
