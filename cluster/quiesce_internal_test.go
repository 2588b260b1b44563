package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/schemaless-db/schemaless/membership"
)

// returnedNodes tells the nodes gossip reported down and now reports alive, from one OnChange
// call to the next, leaving this node out.
func TestReturnedNodes(t *testing.T) {
	member := func(id, state string) membership.Member {
		return membership.Member{Meta: membership.Meta{ID: id}, State: state}
	}
	back, down := returnedNodes(map[string]bool{}, []membership.Member{
		member("n1", membership.StateAlive), member("n2", membership.StateDead), member("n3", membership.StateLeft),
	}, "n1")
	assert.Empty(t, back, "nothing was down before")
	assert.Equal(t, map[string]bool{"n2": true, "n3": true}, down, "down after the first call")

	back, down = returnedNodes(down, []membership.Member{
		member("n1", membership.StateAlive), member("n2", membership.StateAlive), member("n3", membership.StateDead),
		member("n4", membership.StateAlive),
	}, "n1")
	assert.Equal(t, []string{"n2"}, back, "n2 came back; n4 was never down; n3 is still down")
	assert.Equal(t, map[string]bool{"n3": true}, down, "down after the second call")

	back, down = returnedNodes(down, []membership.Member{member("n1", membership.StateDead), member("n3", membership.StateAlive)}, "n1")
	assert.Equal(t, []string{"n3"}, back, "n3 came back")
	assert.Empty(t, down, "this node is never counted down")
}
