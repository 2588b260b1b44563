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

// CheckShards returns nil: a group command names the datastore's shards, which the
// coordinator partition holds for the whole datastore.
func (*Group) CheckShards(cells.ShardRange) error { return nil }
