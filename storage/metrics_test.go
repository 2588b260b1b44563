package storage

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDBStats checks the pools DBStats names on each engine, that they follow partitions
// opening and closing, and that PoolCollector exports them.
func TestDBStats(t *testing.T) {
	t.Parallel()
	forEachSQLEngine(t, func(t *testing.T, e *engineEnv) {
		s := e.open(t)
		p := openPartition(t, s, "users", 3, 0, 3)
		require.NoError(t, p.EnsureShards(t.Context(), []int{0}))
		want := map[string]bool{"users/3/write": true, "users/3/read": true}
		if e.name == EngineMySQL {
			want = map[string]bool{"mysql": true}
		}
		got := s.DBStats()
		for name := range want {
			assert.Contains(t, got, name, "DBStats: no pool %q in %v", name, poolNames(got))
		}
		assert.Len(t, got, len(want), "DBStats: got pools %v, want %v", poolNames(got), poolNames(want))
		open := 0
		for _, st := range got {
			open += st.OpenConnections
		}
		assert.GreaterOrEqual(t, open, 1, "DBStats: open connections, want at least 1 after EnsureShards")

		reg := prometheus.NewRegistry()
		reg.MustRegister(s.PoolCollector())
		fams, err := reg.Gather()
		require.NoError(t, err)
		var names []string
		for _, f := range fams {
			assert.Equal(t, len(want), len(f.GetMetric()), "%s: got %d series, want %d (one per pool)", f.GetName(), len(f.GetMetric()), len(want))
			names = append(names, f.GetName())
		}
		assert.Equal(t, "schemaless_sql_pool_idle,schemaless_sql_pool_in_use,schemaless_sql_pool_max_open,schemaless_sql_pool_open,schemaless_sql_pool_wait_count_total,schemaless_sql_pool_wait_seconds_total",
			strings.Join(names, ","), "families")

		require.NoError(t, p.Close())
		got = s.DBStats()
		if e.name == EngineSQLite {
			assert.Empty(t, got, "DBStats after the partition closed: got pools %v, want none", poolNames(got))
		}
		require.NoError(t, s.Close())
		got = s.DBStats()
		assert.Empty(t, got, "DBStats after Close: got pools %v, want none", poolNames(got))
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
