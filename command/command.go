package command

import (
	"errors"
	"fmt"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// Errors of the codec and of a command's shards.
var (
	// ErrBadCommand: data is not a command this build understands (an unknown kind byte, a
	// layout that does not decode, a row key that is not 16 bytes, an index value of the wrong
	// type for its field).
	ErrBadCommand = errors.New("command: bad command")
	// ErrShardOutOfRange: a command names a shard outside the partition that applies it.
	ErrShardOutOfRange = errors.New("command: shard outside the partition")
)

// Kind is the first byte of an encoded command: the command and the version of its layout.
// The values are fixed for ever (raft logs hold them).
type Kind byte

// The kinds of command. KindCells, KindAppend and KindAppendOrigin carry an *Append.
const (
	// KindCells is the first layout of a cell append: the cells of one write with no ID, not
	// atomic. Still written for such appends, so that a replica of an older build applies them.
	KindCells Kind = 1
	// KindGroup is a consumer-group command (*Group).
	KindGroup Kind = 2
	// KindIndex is an index command (*Index).
	KindIndex Kind = 3
	// KindSchema is a schema command (*Schema).
	KindSchema Kind = 4
	// KindErase is an erase command (*Erase).
	KindErase Kind = 5
	// KindAppend is a cell append of writes with IDs, conditions and atomicity (*Append).
	KindAppend Kind = 6
	// KindSplit is a partition split (*Split).
	KindSplit Kind = 7
	// KindFreeze is the freeze of a merge's right partition (*Freeze).
	KindFreeze Kind = 8
	// KindMerge is a merge into the left partition (*Merge).
	KindMerge Kind = 9
	// KindAppendOrigin is KindAppend's layout with each write's origin cluster (Write.Origin):
	// written only for an append holding a write that arrived by replication between clusters.
	KindAppendOrigin Kind = 10
	// KindEraseOrigin is KindErase's layout with the erasure's origin cluster (Erase.Origin).
	KindEraseOrigin Kind = 11
)

// String names the kind: "cells", "group", "index", "schema", "erase", "append", "split",
// "freeze", "merge", or "unknown(N)".
func (k Kind) String() string {
	switch k {
	case KindCells:
		return "cells"
	case KindGroup:
		return "group"
	case KindIndex:
		return "index"
	case KindSchema:
		return "schema"
	case KindErase:
		return "erase"
	case KindAppend:
		return "append"
	case KindSplit:
		return "split"
	case KindFreeze:
		return "freeze"
	case KindMerge:
		return "merge"
	case KindAppendOrigin:
		return "append-origin"
	case KindEraseOrigin:
		return "erase-origin"
	}
	return fmt.Sprintf("unknown(%d)", byte(k))
}

// KindOf returns the kind byte of encoded data (0 for empty data) without decoding it.
func KindOf(data []byte) Kind {
	if len(data) == 0 {
		return 0
	}
	return Kind(data[0])
}

// Command is one command a partition applies: *Append, *Group, *Index, *Schema, *Erase, *Split,
// *Freeze or *Merge.
// The set is closed; Encode and Decode handle every member.
type Command interface {
	// CheckShards returns an error wrapping ErrShardOutOfRange when the command names a
	// shard outside r (nil for a command that names none).
	CheckShards(r cells.ShardRange) error
	isCommand()
}

// Encode returns the encoded form of c: its kind byte, then MessagePack. Errors are the
// encoder's (a value MessagePack cannot carry); a nil or unknown command is ErrBadCommand.
func Encode(c Command) ([]byte, error) {
	var (
		kind Kind
		v    any
	)
	switch c := c.(type) {
	case *Append:
		kind, v = c.layout()
	case *Group:
		kind, v = KindGroup, c
	case *Index:
		kind, v = KindIndex, c.packed()
	case *Schema:
		kind, v = KindSchema, c
	case *Erase:
		e := *c
		e.CreatedAt = e.CreatedAt.UTC().Truncate(time.Microsecond)
		kind, v = KindErase, &e
		if e.Origin != "" {
			kind = KindEraseOrigin
		}
	case *Split:
		kind, v = KindSplit, c
	case *Freeze:
		kind, v = KindFreeze, c
	case *Merge:
		kind, v = KindMerge, c
	default:
		return nil, fmt.Errorf("%w: encode %T", ErrBadCommand, c)
	}
	b, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("command: encode %s: %w", kind, err)
	}
	out := make([]byte, 0, len(b)+1)
	return append(append(out, byte(kind)), b...), nil
}

// Decode parses data written by Encode (any layout ever written). Errors wrap ErrBadCommand.
func Decode(data []byte) (Command, error) {
	kind := KindOf(data)
	var c Command
	switch kind {
	case KindCells, KindAppend, KindAppendOrigin:
		a, err := decodeAppend(kind, data[1:])
		if err != nil {
			return nil, err
		}
		return a, nil
	case KindGroup:
		c = &Group{}
	case KindIndex:
		c = &Index{}
	case KindSchema:
		c = &Schema{}
	case KindErase, KindEraseOrigin:
		c = &Erase{}
	case KindSplit:
		c = &Split{}
	case KindFreeze:
		c = &Freeze{}
	case KindMerge:
		c = &Merge{}
	default:
		return nil, fmt.Errorf("%w: unknown kind %s", ErrBadCommand, kind)
	}
	if err := msgpack.Unmarshal(data[1:], c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCommand, kind, err)
	}
	switch c := c.(type) {
	case *Group:
		c.CreatedAt = c.CreatedAt.UTC()
	case *Index:
		if err := c.typeValues(); err != nil {
			return nil, err
		}
	case *Schema:
		c.CreatedAt = c.CreatedAt.UTC()
	case *Erase:
		c.CreatedAt = c.CreatedAt.UTC()
		if (c.Origin != "") != (kind == KindEraseOrigin) {
			return nil, fmt.Errorf("%w: %s: an erase with origin %q", ErrBadCommand, kind, c.Origin)
		}
	}
	return c, nil
}

// DecodeAs parses data written by Encode and returns it as a T (*Append, *Group, ...).
// Data of another kind, or that does not decode, is ErrBadCommand.
func DecodeAs[T Command](data []byte) (T, error) {
	var zero T
	c, err := Decode(data)
	if err != nil {
		return zero, err
	}
	t, ok := c.(T)
	if !ok {
		return zero, fmt.Errorf("%w: a %s command, want %T", ErrBadCommand, KindOf(data), zero)
	}
	return t, nil
}

// outOfRange is the ErrShardOutOfRange of a command part naming shard outside r.
func outOfRange(what string, shard int, r cells.ShardRange) error {
	return fmt.Errorf("%w: %s names shard %d, partition holds %d..%d", ErrShardOutOfRange, what, shard, r.First, r.Last)
}
