package main

import (
	"reflect"
	"testing"

	"github.com/schemaless-db/schemaless/api/wire"
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
		if err != nil {
			t.Errorf("parseWhere(%q): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseWhere(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"delay", ">15", "delay>", "delay=>15", "delay>15,", "a==1", "a<>1"} {
		if got, err := parseWhere(bad); err == nil {
			t.Errorf("parseWhere(%q) = %#v, want an error", bad, got)
		}
	}
}

func TestTopOrigins(t *testing.T) {
	counts := map[string]int{"ATL": 4, "ORD": 6, "DFW": 5, "SFO": 4, "LAX": 1}
	if got, want := topOrigins(counts, 4), []string{"ORD", "DFW", "ATL", "SFO"}; !reflect.DeepEqual(got, want) {
		t.Errorf("topOrigins(.., 4) = %v, want %v", got, want)
	}
	if got := topOrigins(counts, 10); len(got) != 5 || got[4] != "LAX" {
		t.Errorf("topOrigins(.., 10) = %v, want all 5, LAX last", got)
	}
	if got := topOrigins(nil, 3); len(got) != 0 {
		t.Errorf("topOrigins(nil, 3) = %v, want none", got)
	}
}

func TestProbeSetNext(t *testing.T) {
	ws := make([]lagWrite, 25) // probes 0..4 are writes 0, 5, 10, 15, 20
	ps := newProbeSet(ws, 5)
	if got := len(ps.seen); got != 5 {
		t.Fatalf("%d probes, want 5", got)
	}
	if got := ps.next(0); got != 0 {
		t.Errorf("next(0) with nothing seen = %d, want 0", got)
	}
	ps.see(0, 100)
	ps.see(2, 120)
	ps.see(7, 130)  // not a probe of this run: ignored
	ps.see(-1, 130) // likewise
	if got := ps.next(0); got != 1 {
		t.Errorf("next(0) with 0 and 2 seen = %d, want 1", got)
	}
	ws[5].failed.Store(true) // probe 1 failed: never waited for
	if got := ps.next(0); got != 3 {
		t.Errorf("next(0) with 0, 2 seen and 1 failed = %d, want 3", got)
	}
	ps.see(2, 500) // the first time counts
	if got := ps.seen[2].Load(); got != 120 {
		t.Errorf("seen[2] = %d, want 120", got)
	}
	ps.see(3, 140)
	ps.see(4, 150)
	if got := ps.next(3); got != 5 {
		t.Errorf("next(3) with every probe seen = %d, want 5 (none left)", got)
	}
	if got := newProbeSet(make([]lagWrite, 26), 5).seen; len(got) != 6 {
		t.Errorf("26 writes, every 5th a probe: %d probes, want 6", len(got))
	}
}
