package command

import (
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
)

// Group is a consumer-group command: one consumer.Command on one group's coordinator state,
// and the proposer's clock when it proposed it (the coordinator's "now"). Its outcome is a
// consumer.Result, or an error wrapping consumer.ErrBadCommand when the coordinator refuses it.
type Group struct {
	_msgpack  struct{} `msgpack:",as_array"`
	Group     string
	CreatedAt time.Time
	Cmd       consumer.Command
}

func (*Group) isCommand() {}

// CheckShards returns an error wrapping ErrShardOutOfRange when r lacks the group's coordinator
// shard (consumer.CoordinatorShard of Group among Cmd.Shards, the datastore's shard count): a
// split or merge gave the group's state to another partition, and a node routing by an older
// catalog sent the command here, where it would change a copy nobody reads. A command without
// a shard count (Cmd.Shards 0, which only a command on an existing group may leave unset) is
// not checked.
func (g *Group) CheckShards(r cells.ShardRange) error {
	if g.Cmd.Shards < 1 {
		return nil
	}
	if s := consumer.CoordinatorShard(g.Group, g.Cmd.Shards); !r.Contains(s) {
		return outOfRange("group "+g.Group, s, r)
	}
	return nil
}
