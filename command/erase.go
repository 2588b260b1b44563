package command

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/vmihailenco/msgpack/v5"
)

// Erase is an erase command: erase every cell of row RowKey, which lives in shard Shard, and
// record the erasure in the shard's log with a tombstone (cells.NewTombstone) created at
// CreatedAt, the proposer's clock. Its outcome is an EraseResult.
//
// Origin, for an erasure that arrived from another cluster (replication between clusters),
// names that cluster: the tombstone stores it (cells.Cell.Origin), so that this cluster does not
// send the erasure on. Empty for an erasure asked in this cluster.
//
// Its MessagePack form is the array [created_at, shard int32, row key (16 bytes)] under
// KindErase, with the origin as a fourth element under KindEraseOrigin.
type Erase struct {
	CreatedAt time.Time
	Shard     int32
	RowKey    uuid.UUID
	Origin    string
}

// EncodeMsgpack writes e as its array of 3 elements, or 4 with an origin (msgpack.CustomEncoder).
func (e *Erase) EncodeMsgpack(enc *msgpack.Encoder) error {
	n := 3
	if e.Origin != "" {
		n = 4
	}
	if err := enc.EncodeArrayLen(n); err != nil {
		return err
	}
	if err := enc.EncodeTime(e.CreatedAt); err != nil {
		return err
	}
	if err := enc.EncodeInt32(e.Shard); err != nil {
		return err
	}
	if err := enc.EncodeBytes(e.RowKey[:]); err != nil {
		return err
	}
	if n == 4 {
		return enc.EncodeString(e.Origin)
	}
	return nil
}

// DecodeMsgpack reads e from its array of 3 or 4 elements (msgpack.CustomDecoder); Decode
// checks that the count matches the kind. An origin that is not a cluster name is refused.
func (e *Erase) DecodeMsgpack(d *msgpack.Decoder) error {
	n, err := d.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n != 3 && n != 4 {
		return fmt.Errorf("erase of %d elements", n)
	}
	*e = Erase{}
	if e.CreatedAt, err = d.DecodeTime(); err != nil {
		return err
	}
	if e.Shard, err = d.DecodeInt32(); err != nil {
		return err
	}
	b, err := d.DecodeBytes()
	if err != nil {
		return err
	}
	if e.RowKey, err = uuid.FromBytes(b); err != nil {
		return err
	}
	if n == 4 {
		if e.Origin, err = d.DecodeString(); err != nil {
			return err
		}
		if err := cells.ValidateClusterName("origin", e.Origin); err != nil {
			return err
		}
	}
	return nil
}

func (*Erase) isCommand() {}

// CheckShards checks Shard against r.
func (e *Erase) CheckShards(r cells.ShardRange) error {
	if !r.Contains(int(e.Shard)) {
		return outOfRange("erase", int(e.Shard), r)
	}
	return nil
}

// EraseResult is the outcome of an erase command: how many cells it deleted (0 when the row had
// none: an unknown row, or one erased before and not written since) and the added_id of the
// tombstone it appended to the shard's log (0 when it deleted nothing: no tombstone then).
type EraseResult struct {
	Erased  int
	AddedID int64
}
