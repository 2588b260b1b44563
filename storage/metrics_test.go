package storage

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDBStats checks the pools DBStats names on each engine, that they follow partitions
// opening and closing, and that PoolCollector exports them.
func TestDBStats(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		s := e.open(t)
		p := openPartition(t, s, "users", 3, 0, 3)
		if err := p.EnsureShards(t.Context(), []int{0}); err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"users/3/write": true, "users/3/read": true}
		if e.name == EngineMySQL {
			want = map[string]bool{"mysql": true}
		}
		got := s.DBStats()
		for name := range want {
			if _, ok := got[name]; !ok {
				t.Errorf("DBStats: no pool %q in %v", name, poolNames(got))
			}
		}
		if len(got) != len(want) {
			t.Errorf("DBStats: got pools %v, want %v", poolNames(got), poolNames(want))
		}
		open := 0
		for _, st := range got {
			open += st.OpenConnections
		}
		if open < 1 {
			t.Errorf("DBStats: got %d open connections, want at least 1 after EnsureShards", open)
		}

		reg := prometheus.NewRegistry()
		reg.MustRegister(s.PoolCollector())
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range fams {
			if len(f.GetMetric()) != len(want) {
				t.Errorf("%s: got %d series, want %d (one per pool)", f.GetName(), len(f.GetMetric()), len(want))
			}
			names = append(names, f.GetName())
		}
		if got, want := strings.Join(names, ","), "schemaless_sql_pool_idle,schemaless_sql_pool_in_use,schemaless_sql_pool_max_open,schemaless_sql_pool_open,schemaless_sql_pool_wait_count_total,schemaless_sql_pool_wait_seconds_total"; got != want {
			t.Errorf("families: got %s, want %s", got, want)
		}

		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		got = s.DBStats()
		if e.name == EngineSQLite && len(got) != 0 {
			t.Errorf("DBStats after the partition closed: got pools %v, want none", poolNames(got))
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if got := s.DBStats(); len(got) != 0 {
			t.Errorf("DBStats after Close: got pools %v, want none", poolNames(got))
		}
	})
}

// poolNames returns the keys of m.
func poolNames[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
