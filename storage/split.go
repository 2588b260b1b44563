package storage

import (
	"context"
	"fmt"

	"github.com/schemaless-db/schemaless/cells"
)

// SupportsSplit reports whether the store can hand a shard range of a partition to another
// partition (WriteTx.DropShards): the pebble engine only, for now.
func (s *Store) SupportsSplit() bool { return s.pebble != nil }

// DropShards deletes, in the transaction, everything the partition holds of shards r (which must
// be inside its range): their cells, logs and index entries and the definitions of their index
// tables. KV rows and request records are the caller's. After the commit, SetShards should
// take r out of the partition's range: a split hands r to another partition, which got a copy
// first. Pebble only (ErrInvalidConfig elsewhere); an error leaves the transaction's outcome
// undefined: roll it back.
func (tx *WriteTx) DropShards(ctx context.Context, r cells.ShardRange) error {
	if err := tx.check(r.First); err != nil {
		return err
	}
	if err := tx.check(r.Last); err != nil {
		return err
	}
	if tx.b == nil {
		return fmt.Errorf("%w: DropShards needs the pebble engine", ErrInvalidConfig)
	}
	pp := tx.p.pb
	del := func(from, to []byte) error { return tx.b.DeleteRange(from, to, nil) }
	for _, tag := range []byte{tagCell, tagLog} {
		if err := del(appendShard(pp.key(tag, 2), r.First), appendShard(pp.key(tag, 2), r.Last+1)); err != nil {
			return err
		}
	}
	tables, err := pp.indexTables(tx.b, r.Contains)
	if err != nil {
		return err
	}
	for name := range tables {
		if err := del(pp.indexBase(name, r.First), pp.indexBase(name, r.Last+1)); err != nil {
			return err
		}
		if err := del(pp.indexDefKey(name, r.First), pp.indexDefKey(name, r.Last+1)); err != nil {
			return err
		}
		if st := tx.p.indexes[name]; st != nil {
			for s := r.First; s <= r.Last; s++ {
				delete(st.shards, s)
			}
		}
	}
	for s := r.First; s <= r.Last; s++ {
		delete(pp.high, s)
		delete(tx.p.created, s)
	}
	return nil
}
