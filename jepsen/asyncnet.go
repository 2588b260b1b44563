package jepsen

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Link addresses of the storage clusters (see Storage): a nat chain named like the filter chain,
// jumped to from the nat table's OUTPUT, sends each link address to its member's bind address.
// Cutting a master from its minions is then one filter rule on the connections whose original
// destination (conntrack) is the master's link address: a minion's replication connection, both
// directions. The nodes and the harness dial bind addresses and are never cut by it.

// setupLinks creates the nat chain (removing one left by an earlier run), hooks it into the
// nat table's OUTPUT and adds a DNAT rule from links[i] to binds[i] for every i. Errors wrap
// ErrNoIptables.
func setupLinks(ctx context.Context, chain string, links, binds []string) error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	_ = teardownLinks(ctx, chain)
	if err := iptables(ctx, "-t", "nat", "-N", chain); err != nil {
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	if err := iptables(ctx, "-t", "nat", "-I", "OUTPUT", "-j", chain); err != nil {
		_ = iptables(ctx, "-t", "nat", "-X", chain)
		return fmt.Errorf("%w: %w", ErrNoIptables, err)
	}
	for i := range links {
		if err := iptables(ctx, "-t", "nat", "-A", chain, "-d", links[i]+"/32", "-p", "tcp", "-j", "DNAT", "--to-destination", binds[i]); err != nil {
			_ = teardownLinks(ctx, chain)
			return fmt.Errorf("%w: %w", ErrNoIptables, err)
		}
	}
	return nil
}

// teardownLinks removes the nat chain and its hook. Safe to call when they do not exist.
func teardownLinks(ctx context.Context, chain string) error {
	for iptables(ctx, "-t", "nat", "-D", "OUTPUT", "-j", chain) == nil {
	}
	if err := iptables(ctx, "-t", "nat", "-F", chain); err != nil && !strings.Contains(err.Error(), "No chain") && !strings.Contains(err.Error(), "does not exist") {
		return err
	}
	_ = iptables(ctx, "-t", "nat", "-X", chain)
	return nil
}

// CutLink drops every packet of the connections first sent to link (conntrack's original
// destination), both directions, on top of the links already cut. Heal removes it with the
// rest.
func (n *Net) CutLink(ctx context.Context, link string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return iptables(ctx, "-A", n.chain, "-m", "conntrack", "--ctorigdst", link+"/32", "-j", "DROP")
}
