package catalog

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPeers: OpSetPeer adds, replaces and removes a peer's settings, raising the generation;
// peers survive Encode and Decode and Clone; bad names, unknown peers and too many peers are
// refused with nothing changed.
func TestPeers(t *testing.T) {
	c := trips(t)
	gen := c.Generation
	mustApply(t, c, Command{Op: OpSetPeer, Peer: "west", Settings: []byte("v1")})
	mustApply(t, c, Command{Op: OpSetPeer, Peer: "north", Settings: []byte("n1")})
	assert.Equal(t, gen+2, c.Generation)
	assert.Equal(t, []string{"north", "west"}, c.PeerNames())
	mustApply(t, c, Command{Op: OpSetPeer, Peer: "west", Settings: []byte("v2")})
	assert.Equal(t, []byte("v2"), c.Peers["west"], "replaced")

	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, c.Peers, back.Peers, "after Encode and Decode")
	cl := c.Clone()
	cl.Peers["west"][0] = 'X'
	assert.Equal(t, []byte("v2"), c.Peers["west"], "a clone's change leaves the original")

	before := c.Generation
	for _, cmd := range []Command{
		{Op: OpSetPeer, Peer: "West", Settings: []byte("x")},
		{Op: OpSetPeer, Peer: "", Settings: []byte("x")},
		{Op: OpSetPeer, Peer: "south"},
		{Op: OpSetPeer, Peer: "west", Settings: make([]byte, MaxPeerBytes+1)},
	} {
		_, err := c.Apply(cmd)
		assert.Error(t, err, "%+v", cmd.Peer)
	}
	assert.Equal(t, before, c.Generation, "refusals change nothing")

	mustApply(t, c, Command{Op: OpSetPeer, Peer: "north"})
	assert.Equal(t, []string{"west"}, c.PeerNames(), "removed")
	for i := len(c.Peers); i < MaxPeers; i++ {
		mustApply(t, c, Command{Op: OpSetPeer, Peer: fmt.Sprintf("p%d", i), Settings: []byte("x")})
	}
	_, err = c.Apply(Command{Op: OpSetPeer, Peer: "one-more", Settings: []byte("x")})
	assert.ErrorIs(t, err, ErrBadCommand, "past MaxPeers")
}
