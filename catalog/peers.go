package catalog

import (
	"fmt"
	"slices"
	"sort"

	"github.com/schemaless-db/schemaless/cells"
)

// MaxPeers bounds the peer clusters a catalog lists (OpSetPeer), and MaxPeerBytes the settings
// of one.
const (
	MaxPeers     = 16
	MaxPeerBytes = 64 << 10
)

// OpSetPeer sets (Command.Settings not empty) or removes (empty) the peer cluster
// Command.Peer: a cluster this one replicates to (replication between clusters). The settings
// are opaque to the catalog; their owner (package peering) encodes them.
const OpSetPeer Op = "set-peer"

// setPeer applies OpSetPeer.
func (c *Catalog) setPeer(cmd Command) (Result, error) {
	if err := cells.ValidateClusterName("peer", cmd.Peer); err != nil {
		return Result{}, fmt.Errorf("%w: set-peer: %w", ErrBadCommand, err)
	}
	if len(cmd.Settings) > MaxPeerBytes {
		return Result{}, fmt.Errorf("%w: set-peer %s: %d bytes of settings, at most %d", ErrBadCommand, cmd.Peer, len(cmd.Settings), MaxPeerBytes)
	}
	if len(cmd.Settings) == 0 {
		if _, ok := c.Peers[cmd.Peer]; !ok {
			return Result{}, fmt.Errorf("%w: set-peer: no peer %q", ErrNotFound, cmd.Peer)
		}
		delete(c.Peers, cmd.Peer)
	} else {
		if _, ok := c.Peers[cmd.Peer]; !ok && len(c.Peers) >= MaxPeers {
			return Result{}, fmt.Errorf("%w: set-peer %s: %d peers already, at most %d", ErrBadCommand, cmd.Peer, len(c.Peers), MaxPeers)
		}
		if c.Peers == nil {
			c.Peers = map[string][]byte{}
		}
		c.Peers[cmd.Peer] = slices.Clone(cmd.Settings)
	}
	c.Generation++
	return Result{Generation: c.Generation}, nil
}

// PeerNames returns the names of c's peers, sorted.
func (c *Catalog) PeerNames() []string {
	out := make([]string, 0, len(c.Peers))
	for name := range c.Peers {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// checkPeers checks c's peers for Check: valid names, within the limits.
func (c *Catalog) checkPeers() error {
	if len(c.Peers) > MaxPeers {
		return fmt.Errorf("%w: %d peers, at most %d", ErrCorrupt, len(c.Peers), MaxPeers)
	}
	for name, b := range c.Peers {
		if err := cells.ValidateClusterName("peer", name); err != nil || len(b) == 0 || len(b) > MaxPeerBytes {
			return fmt.Errorf("%w: peer %q: invalid name or settings of %d bytes", ErrCorrupt, name, len(b))
		}
	}
	return nil
}

func clonePeers(p map[string][]byte) map[string][]byte {
	if p == nil {
		return nil
	}
	out := make(map[string][]byte, len(p))
	for k, v := range p {
		out[k] = slices.Clone(v)
	}
	return out
}
