package jepsen

import (
	"slices"
	"testing"
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
	g := Components([]string{"a"}, []string{"b", "c"})
	got := sees([]string{"a", "b", "c"}, g)
	if !slices.Equal(got["a"], []string{"a"}) || !slices.Equal(got["b"], []string{"b", "c"}) || !slices.Equal(got["c"], []string{"b", "c"}) {
		t.Fatalf("a | b c: got %v", got)
	}
}

func TestMajoritiesRing(t *testing.T) {
	for _, nodes := range [][]string{{"a", "b", "c"}, {"a", "b", "c", "d", "e"}} {
		got := sees(nodes, MajoritiesRing(nodes))
		majority := len(nodes)/2 + 1
		views := map[string]bool{}
		for _, n := range nodes {
			v := got[n]
			if len(v) != majority {
				t.Errorf("%d nodes: %s sees %v, want a majority of %d", len(nodes), n, v, majority)
			}
			key := ""
			for _, x := range v {
				key += x
			}
			if views[key] {
				t.Errorf("%d nodes: two nodes see the same majority %v", len(nodes), v)
			}
			views[key] = true
		}
	}
}

func TestBridge(t *testing.T) {
	nodes := []string{"a", "b", "c", "d", "e"}
	g, bridge := Bridge(nodes)
	got := sees(nodes, g)
	if bridge != "c" || len(got["c"]) != 5 {
		t.Fatalf("bridge %s sees %v, want c seeing everyone", bridge, got["c"])
	}
	if !slices.Equal(got["a"], []string{"a", "b", "c"}) || !slices.Equal(got["e"], []string{"c", "d", "e"}) {
		t.Fatalf("sides: a sees %v, e sees %v", got["a"], got["e"])
	}
}
