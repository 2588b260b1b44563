package jepsen

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sees returns, for each node, the set of nodes it hears from under g (itself included).
func sees(nodes []string, g Grudge) map[string][]string {
	out := map[string][]string{}
	for _, dst := range nodes {
		for _, src := range nodes {
			if !slices.Contains(g[dst], src) {
				out[dst] = append(out[dst], src)
			}
		}
	}
	return out
}

func TestComponents(t *testing.T) {
	t.Parallel()
	g := Components([]string{"a"}, []string{"b", "c"})
	got := sees([]string{"a", "b", "c"}, g)
	assert.Equal(t, map[string][]string{"a": {"a"}, "b": {"b", "c"}, "c": {"b", "c"}}, got, "a | b c: who sees whom")
}

func TestMajoritiesRing(t *testing.T) {
	t.Parallel()
	for _, nodes := range [][]string{{"a", "b", "c"}, {"a", "b", "c", "d", "e"}} {
		got := sees(nodes, MajoritiesRing(nodes))
		majority := len(nodes)/2 + 1
		views := map[string]bool{}
		for _, n := range nodes {
			v := got[n]
			assert.Len(t, v, majority, "%d nodes: %s sees %v, want a majority", len(nodes), n, v)
			key := ""
			for _, x := range v {
				key += x
			}
			assert.False(t, views[key], "%d nodes: two nodes see the same majority %v", len(nodes), v)
			views[key] = true
		}
	}
}

func TestBridge(t *testing.T) {
	t.Parallel()
	nodes := []string{"a", "b", "c", "d", "e"}
	g, bridge := Bridge(nodes)
	got := sees(nodes, g)
	require.Equal(t, "c", bridge, "bridge")
	require.Len(t, got["c"], 5, "the bridge sees %v, want everyone", got["c"])
	assert.Equal(t, []string{"a", "b", "c"}, got["a"], "side of a")
	assert.Equal(t, []string{"c", "d", "e"}, got["e"], "side of e")
}
