package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/wire"
)

// A shard the node re-routed and its partition still refused (a split or merge under way, a
// merge's freeze not decided yet) is a 503 to retry, not a client error or an internal one; a
// shard outside the datastore stays a 400 naming the field.
func TestBackendErrorShardOutOfRange(t *testing.T) {
	refused := backendError(fmt.Errorf("%w: shard 8, partition holds 8..7", command.ErrShardOutOfRange))
	assert.Equal(t, http.StatusServiceUnavailable, refused.status, "refused by the partition: %s", refused.msg)
	assert.Equal(t, wire.CodeUnavailable, refused.code)
	forwarded := backendError(fmt.Errorf("%w (%w): no partition 14", cluster.ErrBadShard, command.ErrShardOutOfRange))
	assert.Equal(t, http.StatusServiceUnavailable, forwarded.status, "refused by the partition's node: %s", forwarded.msg)
	bad := backendError(fmt.Errorf("%w: 70 not in 0..63", cluster.ErrBadShard))
	assert.Equal(t, http.StatusBadRequest, bad.status, "a shard outside the datastore")
	assert.Equal(t, "shard", bad.field)
}
