package catalog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A partition's learners are recorded and forgotten, go to a split's right half, stay with a
// merge's left partition, are no longer learners once among the replicas, and round-trip
// through the encoding; bad learner commands change nothing.
func TestLearners(t *testing.T) {
	c := trips(t)
	learners := func(id int) []string { return c.Datastores["trips"].Partition(id).Learners }
	res := mustApply(t, c, Command{Op: OpAddLearner, Datastore: "trips", Partition: 1, Learner: "n7"})
	assert.Equal(t, []string{"n7"}, res.Partitions[0].Learners, "the answer names the learner")
	mustApply(t, c, Command{Op: OpAddLearner, Datastore: "trips", Partition: 1, Learner: "n5"})
	gen := c.Generation
	mustApply(t, c, Command{Op: OpAddLearner, Datastore: "trips", Partition: 1, Learner: "n7"})
	assert.Equal(t, gen+1, c.Generation, "adding a recorded learner raises the generation")
	assert.Equal(t, []string{"n5", "n7"}, learners(1), "learners of partition 1, in order, once each")
	assert.Empty(t, learners(0), "partition 0 has none")

	split := mustApply(t, c, Command{Op: OpSplit, Datastore: "trips", Partition: 1, AtShard: 24, Now: now})
	right := split.Partitions[1].ID
	assert.Equal(t, []string{"n5", "n7"}, learners(right), "the right half starts with its parent's learners")
	assert.Equal(t, []string{"n5", "n7"}, learners(1), "the left half keeps them")

	mustApply(t, c, Command{Op: OpRemoveLearner, Datastore: "trips", Partition: right, Learner: "n7"})
	assert.Equal(t, []string{"n5"}, learners(right), "n7 removed from the right half")
	assert.Equal(t, []string{"n5", "n7"}, learners(1), "and kept by the left one")
	mustApply(t, c, Command{Op: OpRemoveLearner, Datastore: "trips", Partition: right, Learner: "n9"})
	assert.Equal(t, []string{"n5"}, learners(right), "removing a learner not recorded changes no learner")

	mustApply(t, c, Command{Op: OpMerge, Datastore: "trips", Partition: 1, Right: right, Now: now})
	assert.Equal(t, []string{"n5", "n7"}, learners(1), "a merge keeps the left partition's learners")

	mustApply(t, c, Command{Op: OpSetReplicas, Datastore: "trips", Partition: 1, Replicas: []string{"n1", "n2", "n7"}})
	assert.Equal(t, []string{"n5"}, learners(1), "n7, promoted among the replicas, is a learner no more")

	b, err := Encode(c)
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, []string{"n5"}, back.Datastores["trips"].Partition(1).Learners, "learners round-trip through the encoding")

	mustApply(t, c, Command{Op: OpCreate, Create: Spec{Name: "rides", Mode: ModeAsync, Shards: 4, Clusters: []string{"c1"}}})
	before, err := Encode(c)
	require.NoError(t, err)
	for _, cmd := range []Command{
		{Op: OpAddLearner, Datastore: "trips", Partition: 1, Learner: ""},
		{Op: OpAddLearner, Datastore: "trips", Partition: 1, Learner: string(make([]byte, maxNodeIDLen+1))},
		{Op: OpAddLearner, Datastore: "rides", Partition: 0, Learner: "n5"},
		{Op: OpAddLearner, Datastore: "trips", Partition: 99, Learner: "n5"},
	} {
		_, err := c.Apply(cmd)
		assert.Error(t, err, "%+v refused", cmd)
	}
	after, err := Encode(c)
	require.NoError(t, err)
	assert.Equal(t, before, after, "refused learner commands change nothing")
	for i := range MaxReplicas - 1 {
		mustApply(t, c, Command{Op: OpAddLearner, Datastore: "trips", Partition: 0, Learner: string(rune('a' + i))})
	}
	_, err = c.Apply(Command{Op: OpAddLearner, Datastore: "trips", Partition: 0, Learner: "zz"})
	require.NoError(t, err, "the %d-th learner", MaxReplicas)
	before, err = Encode(c)
	require.NoError(t, err)
	_, err = c.Apply(Command{Op: OpAddLearner, Datastore: "trips", Partition: 0, Learner: "zzz"})
	assert.ErrorIs(t, err, ErrBadCommand, "a learner past MaxReplicas")
	after, err = Encode(c)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused learner changes nothing")

	broken := c.Clone()
	broken.Datastores["trips"].Partition(1).Learners = []string{"n7", "n5"}
	bb, err := Encode(broken)
	require.NoError(t, err)
	_, err = Decode(bb)
	assert.ErrorIs(t, err, ErrCorrupt, "learners out of order")
}
