package jepsen

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseNemeses(t *testing.T) {
	t.Parallel()
	assert.Nil(t, ParseNemeses("none", false), "none")
	assert.Nil(t, ParseNemeses("", true), "empty")
	assert.Equal(t, AllNemeses, ParseNemeses("all", false), "all in raft mode")
	assert.Equal(t, AllAsyncNemeses, ParseNemeses("all", true), "all in async mode")
	assert.Equal(t, MembershipNemeses, ParseNemeses("membership", false))
	assert.Equal(t, []string{KillRandom, RemoveAddVoter, MoveReplica, TransferLeader, PartitionOne},
		ParseNemeses("kill-random,membership,partition-one", false), "words in order, groups expanded in place")
	got := ParseNemeses("all,membership", false)
	assert.Len(t, got, len(AllNemeses)+len(MembershipNemeses))
	assert.False(t, slices.ContainsFunc(AllNemeses, IsMembershipNemesis), "all leaves the membership nemeses out")
	assert.Equal(t, []string{"no-such-nemesis"}, ParseNemeses("no-such-nemesis", false), "unknown words are Run's to refuse")
}
