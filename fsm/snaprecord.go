package fsm

import (
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// snapshotRecord is one record of the stream: a cell of shard Shard (>= 0); a KV row (Shard
// kvShard, -2: Column holds the key, Body the value); or the trailer (Shard trailerShard, -1:
// AddedID is the number of cell records, RefKey the number of KV records).
//
// Its MessagePack form is the array [shard int32, added_id int64, row key, column, ref key
// int64, body, created_at µs int64], with an eighth element, the cell's origin cluster
// (cells.Cell.Origin), only on the record of a cell that has one: the stream of a partition
// with no replicated cells is byte for byte what builds before origins wrote, and a reader
// takes both forms.
type snapshotRecord struct {
	Shard           int32
	AddedID         int64
	RowKey          []byte
	Column          string
	RefKey          int64
	Body            []byte
	CreatedAtMicros int64
	Origin          string
}

var (
	_ msgpack.CustomEncoder = (*snapshotRecord)(nil)
	_ msgpack.CustomDecoder = (*snapshotRecord)(nil)
)

// EncodeMsgpack writes r as its array of 7 or 8 elements (msgpack.CustomEncoder).
func (r *snapshotRecord) EncodeMsgpack(e *msgpack.Encoder) error {
	n := 7
	if r.Origin != "" {
		n = 8
	}
	if err := e.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := e.EncodeInt32(r.Shard); err != nil {
		return err
	}
	if err := e.EncodeInt64(r.AddedID); err != nil {
		return err
	}
	if err := e.EncodeBytes(r.RowKey); err != nil {
		return err
	}
	if err := e.EncodeString(r.Column); err != nil {
		return err
	}
	if err := e.EncodeInt64(r.RefKey); err != nil {
		return err
	}
	if err := e.EncodeBytes(r.Body); err != nil {
		return err
	}
	if err := e.EncodeInt64(r.CreatedAtMicros); err != nil {
		return err
	}
	if n == 8 {
		return e.EncodeString(r.Origin)
	}
	return nil
}

// DecodeMsgpack reads r from its array of 7 or 8 elements (msgpack.CustomDecoder); an origin
// that is not a valid cluster name is an error wrapping ErrBadSnapshot.
func (r *snapshotRecord) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 7 && n != 8 {
		return fmt.Errorf("%w: record of %d elements", ErrBadSnapshot, n)
	}
	*r = snapshotRecord{}
	if r.Shard, err = d.DecodeInt32(); err != nil {
		return err
	}
	if r.AddedID, err = d.DecodeInt64(); err != nil {
		return err
	}
	if r.RowKey, err = d.DecodeBytes(); err != nil {
		return err
	}
	if r.Column, err = d.DecodeString(); err != nil {
		return err
	}
	if r.RefKey, err = d.DecodeInt64(); err != nil {
		return err
	}
	if r.Body, err = d.DecodeBytes(); err != nil {
		return err
	}
	if r.CreatedAtMicros, err = d.DecodeInt64(); err != nil {
		return err
	}
	if n == 8 {
		if r.Origin, err = d.DecodeString(); err != nil {
			return err
		}
		if err := cells.ValidateClusterName("origin", r.Origin); err != nil {
			return fmt.Errorf("%w: %w", ErrBadSnapshot, err)
		}
	}
	return nil
}
