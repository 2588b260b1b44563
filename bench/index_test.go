package bench

import (
	"testing"

	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseWhere(t *testing.T) {
	tests := []struct {
		in   string
		want []wire.IndexCond
	}{
		{"", nil},
		{"  ", nil},
		{"delay>15", []wire.IndexCond{{Field: "delay", Op: ">", Value: int64(15)}}},
		{" delay >= -5 , origin = ORD", []wire.IndexCond{{Field: "delay", Op: ">=", Value: int64(-5)}, {Field: "origin", Op: "=", Value: "ORD"}}},
		{"distance<=2.5,x!=true,y<false", []wire.IndexCond{
			{Field: "distance", Op: "<=", Value: 2.5}, {Field: "x", Op: "!=", Value: true}, {Field: "y", Op: "<", Value: false}}},
		{"date>=2001-01-15T00:00:00Z", []wire.IndexCond{{Field: "date", Op: ">=", Value: "2001-01-15T00:00:00Z"}}},
		{"flag=T", []wire.IndexCond{{Field: "flag", Op: "=", Value: "T"}}}, // only true and false are bools
	}
	for _, tt := range tests {
		got, err := parseWhere(tt.in)
		if assert.NoError(t, err, "parseWhere(%q)", tt.in) {
			assert.Equal(t, tt.want, got, "parseWhere(%q)", tt.in)
		}
	}
	for _, bad := range []string{"delay", ">15", "delay>", "delay=>15", "delay>15,", "a==1", "a<>1"} {
		got, err := parseWhere(bad)
		assert.Error(t, err, "parseWhere(%q) = %#v, want an error", bad, got)
	}
}

func TestTopOrigins(t *testing.T) {
	counts := map[string]int{"ATL": 4, "ORD": 6, "DFW": 5, "SFO": 4, "LAX": 1}
	assert.Equal(t, []string{"ORD", "DFW", "ATL", "SFO"}, topOrigins(counts, 4), "topOrigins(.., 4)")
	all := topOrigins(counts, 10)
	if assert.Len(t, all, 5, "topOrigins(.., 10): all 5") {
		assert.Equal(t, "LAX", all[4], "topOrigins(.., 10): LAX last")
	}
	assert.Empty(t, topOrigins(nil, 3), "topOrigins(nil, 3)")
}

func TestProbeSetNext(t *testing.T) {
	ws := make([]lagWrite, 25) // probes 0..4 are writes 0, 5, 10, 15, 20
	ps := newProbeSet(ws, 5)
	require.Len(t, ps.seen, 5, "probes")
	assert.Equal(t, 0, ps.next(0), "next(0) with nothing seen")
	ps.see(0, 100)
	ps.see(2, 120)
	ps.see(7, 130)  // not a probe of this run: ignored
	ps.see(-1, 130) // likewise
	assert.Equal(t, 1, ps.next(0), "next(0) with 0 and 2 seen")
	ws[5].failed.Store(true) // probe 1 failed: never waited for
	assert.Equal(t, 3, ps.next(0), "next(0) with 0, 2 seen and 1 failed")
	ps.see(2, 500) // the first time counts
	assert.Equal(t, int64(120), ps.seen[2].Load(), "seen[2]")
	ps.see(3, 140)
	ps.see(4, 150)
	assert.Equal(t, 5, ps.next(3), "next(3) with every probe seen: none left")
	assert.Len(t, newProbeSet(make([]lagWrite, 26), 5).seen, 6, "26 writes, every 5th a probe")
}
