package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
)

// ErrNoIptables: network faults need iptables and the right to change its rules (root).
var ErrNoIptables = errors.New("jepsen: iptables is not usable (install it and run as root)")

// Net cuts and heals links between nodes with iptables rules on their loopback addresses. All
// rules live in one chain of the filter table, jumped to from INPUT, so Heal is one flush and a
// crashed run leaves nothing that the next Setup does not remove. A rule drops the packets from
// one node's IP to another's: links can be cut in one direction only (a grudge), and the harness's
// own clients (from 127.0.0.1) are never cut off.
type Net struct {
	chain string
	mu    sync.Mutex
	cut   Grudge
}

// Grudge says, for each node IP, the node IPs whose packets it drops (Jepsen's term).
type Grudge map[string][]string

// NewNet returns a Net managing the iptables chain named chain (at most 28 characters).
func NewNet(chain string) *Net { return &Net{chain: chain} }

func iptables(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Setup creates the chain (removing one left by an earlier run) and hooks it into INPUT.
// Errors wrap ErrNoIptables when iptables is missing or refuses (not root).
func (n *Net) Setup(ctx context.Context) error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	_ = n.Teardown(ctx)
	if err := iptables(ctx, "-N", n.chain); err != nil {
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	if err := iptables(ctx, "-I", "INPUT", "-j", n.chain); err != nil {
		_ = iptables(ctx, "-X", n.chain)
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	return nil
}

// Teardown removes the chain and its hook. Safe to call when they do not exist.
func (n *Net) Teardown(ctx context.Context) error {
	var errs []error
	for iptables(ctx, "-D", "INPUT", "-j", n.chain) == nil {
	}
	if err := iptables(ctx, "-F", n.chain); err != nil && !strings.Contains(err.Error(), "No chain") && !strings.Contains(err.Error(), "does not exist") {
		errs = append(errs, err)
	}
	_ = iptables(ctx, "-X", n.chain)
	n.mu.Lock()
	n.cut = nil
	n.mu.Unlock()
	return errors.Join(errs...)
}

// Cut applies g on top of the links already cut: for every dst and src in g[dst], packets from
// src to dst are dropped.
func (n *Net) Cut(ctx context.Context, g Grudge) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	dsts := make([]string, 0, len(g))
	for d := range g {
		dsts = append(dsts, d)
	}
	sort.Strings(dsts)
	if n.cut == nil {
		n.cut = Grudge{}
	}
	for _, dst := range dsts {
		for _, src := range g[dst] {
			if err := iptables(ctx, "-A", n.chain, "-s", src+"/32", "-d", dst+"/32", "-j", "DROP"); err != nil {
				return err
			}
			n.cut[dst] = append(n.cut[dst], src)
		}
	}
	return nil
}

// Heal drops every rule: all links work again.
func (n *Net) Heal(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut = nil
	return iptables(ctx, "-F", n.chain)
}

// Components returns a grudge that splits nodes into the given components: every node drops
// packets from every node outside its own component.
func Components(components ...[]string) Grudge {
	g := Grudge{}
	for i, c := range components {
		for _, dst := range c {
			for j, other := range components {
				if i == j {
					continue
				}
				g[dst] = append(g[dst], other...)
			}
		}
	}
	return g
}

// MajoritiesRing returns Jepsen's majorities-ring grudge for nodes (in ring order): every node
// sees a majority of the cluster (itself and its nearest neighbours on the ring), but no two nodes
// see the same majority. Links may be cut in one direction only. With fewer than 4 nodes a
// majority is two nodes, and node i sees only node i+1.
func MajoritiesRing(nodes []string) Grudge {
	n := len(nodes)
	majority := n/2 + 1
	g := Grudge{}
	for i, dst := range nodes {
		sees := map[int]bool{i: true}
		// The nearest neighbours, alternating forward and back, until a majority.
		for d := 1; len(sees) < majority; d++ {
			sees[(i+d)%n] = true
			if len(sees) < majority {
				sees[(i-d+n)%n] = true
			}
		}
		for j, src := range nodes {
			if !sees[j] {
				g[dst] = append(g[dst], src)
			}
		}
	}
	return g
}

// Bridge returns a grudge splitting nodes into two sides joined by one node, the bridge, which
// sees both: nodes[:k] | bridge | nodes[k+1:], with the bridge in the middle of the list.
func Bridge(nodes []string) (Grudge, string) {
	mid := len(nodes) / 2
	left, bridge, right := nodes[:mid], nodes[mid], nodes[mid+1:]
	g := Grudge{}
	for _, a := range left {
		g[a] = append(g[a], right...)
	}
	for _, b := range right {
		g[b] = append(g[b], left...)
	}
	return g, bridge
}
