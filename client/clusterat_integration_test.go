package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// ClusterAt asks one given node, once: each node names itself, a node not in the client's
// endpoints answers too, and an endpoint nothing listens on fails at once as unavailable.
func TestClusterAt(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{})
	urls := c.URLs()
	cl := itClient(t, urls[:1], nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for _, u := range urls {
		st, err := cl.ClusterAt(ctx, u)
		require.NoError(t, err, "ClusterAt(%s)", u)
		assert.NotEmpty(t, st.Datastores, "ClusterAt(%s): datastores", u)
		seen[st.Node] = true
	}
	assert.Len(t, seen, len(urls), "every node answers for itself: %v", seen)
	start := time.Now()
	_, err := cl.ClusterAt(ctx, deadURL(t))
	assert.ErrorIs(t, err, client.ErrUnavailable, "nothing listens there")
	assert.Less(t, time.Since(start), 5*time.Second, "one attempt, no retries")
	_, err = cl.ClusterAt(ctx, "not a url")
	assert.ErrorIs(t, err, client.ErrInvalidConfig)
}
