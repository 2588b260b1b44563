package membership

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeyring: nodes sharing a gossip key see each other; a node without the key, or with
// another key, is not let in (its messages are dropped), so it never appears as a member.
func TestKeyring(t *testing.T) {
	t.Parallel()
	log := testLogger(t)
	key := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{9}, 32)
	withKeys := func(keys ...[]byte) func(*Config) { return func(c *Config) { c.Keys = keys } }
	n1 := startNode(t, log, "n1", nil, withKeys(key))
	seed := []string{n1.cfg.Meta.GossipAddr}
	// n2 rotates: it encrypts with a new key and still accepts the old one.
	n2 := startNode(t, log, "n2", seed, withKeys(other, key))
	n3 := startNode(t, log, "n3", seed, withKeys(key))
	require.Eventually(t, func() bool {
		alive, _ := n1.Alive("n3")
		return alive
	}, detect, tick, "n3 (same key) joins n1")
	plain := startNode(t, log, "plain", seed, nil)
	stranger := startNode(t, log, "stranger", seed, withKeys(other))
	time.Sleep(3 * time.Second) // several push/pull and probe rounds
	for _, id := range []string{"plain", "stranger"} {
		_, known := n1.Alive(id)
		assert.False(t, known, "%s joined a cluster whose key it lacks", id)
		_, known = n3.Alive(id)
		assert.False(t, known, "%s joined a cluster whose key it lacks", id)
	}
	_, known := plain.Alive("n1")
	assert.False(t, known, "the plaintext node learned the cluster's members")
	_, known = stranger.Alive("n1")
	assert.False(t, known, "the node with another key learned the cluster's members")
	_, known = n2.Alive("n1")
	assert.False(t, known, "n2 encrypts with a key n1 does not hold: n1 drops its join")
}
