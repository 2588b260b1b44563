package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"

	"github.com/schemaless-db/schemaless/cells"
)

// The directory of a pebble store: one entry per partition, naming the generations (data
// prefixes) that hold its data. A partition's data is in two parts, each under a generation:
//
//   - its state: the applied state, KV rows and request records (tagApplied, tagKV,
//     tagRequest, tagRequestTime), never shared;
//   - its shards' data: cells, logs, index tables (tagCell, tagLog, tagIndexDef, tagIndex),
//     every key of which names its shard.
//
// A partition that was created, restored or migrated has both in one generation and owns all
// of it (an entry of 8 bytes: the generation). A split shares: the right half gets a new
// generation for its state and the parent's generation for its shards' data, which stay where
// they are (CockroachDB's ranges share one engine in the same way), so that a split copies no
// cell. Each partition of a shared generation then records the shard range it owns there (an
// entry of 20 bytes: state generation, shards' generation, first and last shard owned), and
// what a partition leaves behind when it moves to another generation (Restore) or is deleted is
// only what it owned: the whole generation once no entry names it.

// dirEntry is a decoded directory entry (see above).
type dirEntry struct {
	state, shards uint64
	// shared: the shards' generation may hold other partitions' shards; owned is then the
	// range this partition owns there (Last < First: none).
	shared bool
	owned  cells.ShardRange
}

// encode returns the stored form of e.
func (e dirEntry) encode() []byte {
	v := binary.BigEndian.AppendUint64(nil, e.state)
	if !e.shared {
		return v
	}
	v = binary.BigEndian.AppendUint64(v, e.shards)
	first, last := e.owned.First, e.owned.Last
	if last < first {
		first, last = 1, 0
	}
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(v, uint16(first)), uint16(last))
}

// decodeDir decodes a directory entry's value.
func decodeDir(v []byte) (dirEntry, error) {
	switch len(v) {
	case 8:
		g := binary.BigEndian.Uint64(v)
		return dirEntry{state: g, shards: g}, nil
	case 20:
		return dirEntry{state: binary.BigEndian.Uint64(v), shards: binary.BigEndian.Uint64(v[8:]), shared: true,
			owned: cells.ShardRange{First: int(binary.BigEndian.Uint16(v[16:])), Last: int(binary.BigEndian.Uint16(v[18:]))}}, nil
	}
	return dirEntry{}, fmt.Errorf("storage: pebble directory entry of %d bytes: %w", len(v), errBadValue)
}

// shardTag reports whether keys of tag name their shard (and live in the shards' generation).
func shardTag(tag byte) bool {
	return tag == tagCell || tag == tagLog || tag == tagIndexDef || tag == tagIndex
}

// directory returns every entry of the store's directory, by key, as r sees it.
func (ps *pebbleStore) directory(r reader) (map[string]dirEntry, error) {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: []byte{dirTag}, UpperBound: []byte{dirTag + 1}})
	if err != nil {
		return nil, fmt.Errorf("storage: pebble directory: %w", err)
	}
	out := map[string]dirEntry{}
	for it.First(); it.Valid(); it.Next() {
		e, err := decodeDir(it.Value())
		if err != nil {
			return nil, errors.Join(err, it.Close())
		}
		out[string(it.Key())] = e
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("storage: pebble directory: %w", err)
	}
	return out, nil
}

// entry returns the directory entry at key dir as r sees it (false: none).
func (ps *pebbleStore) entry(r reader, dir []byte) (dirEntry, bool, error) {
	v, ok, err := getCopy(r, dir)
	if err != nil || !ok {
		return dirEntry{}, false, err
	}
	e, err := decodeDir(v)
	return e, err == nil, err
}

// release writes into b the deletion of what the partition whose entry was old (at directory
// key dir) leaves behind when its entry changes: each of old's generations that no other
// entry names, and no generation of keep, is deleted whole; of one still named elsewhere only
// the partition's own part is: its state keys (when it is old's state generation) and the
// keys of the shards it owned (when it is old's shards' generation and shared). The caller
// holds ps.dirMu, so that the directory does not change between its read and b's commit.
func (ps *pebbleStore) release(b *pebble.Batch, dir []byte, old dirEntry, keep ...uint64) error {
	all, err := ps.directory(ps.db)
	if err != nil {
		return err
	}
	named := map[uint64]bool{}
	for _, g := range keep {
		named[g] = true
	}
	for k, e := range all {
		if k != string(dir) {
			named[e.state], named[e.shards] = true, true
		}
	}
	del := func(gen uint64) error { return b.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), nil) }
	if !named[old.state] {
		if err := del(old.state); err != nil {
			return err
		}
	} else {
		for _, tag := range []byte{tagApplied, tagKV, tagRequest, tagRequestTime} {
			if err := b.DeleteRange(append(dataPrefix(old.state), tag), append(dataPrefix(old.state), tag+1), nil); err != nil {
				return err
			}
		}
	}
	switch {
	case old.shards != old.state && !named[old.shards]:
		return del(old.shards)
	case !named[old.shards] || !old.shared || old.owned.Last < old.owned.First:
		return nil // deleted whole above, or kept by the new entry, or nothing owned
	}
	return deleteShardKeys(ps.db, b, dataPrefix(old.shards), old.owned)
}

// deleteShardKeys writes into b the deletion of every key of shards r under the generation
// prefix gen: cells, logs, and the definitions and entries of every index table on them (as r
// reads the definitions).
func deleteShardKeys(r reader, b *pebble.Batch, gen []byte, sr cells.ShardRange) error {
	view := &pebblePart{prefix: gen, cellPrefix: gen}
	for _, tag := range []byte{tagCell, tagLog} {
		if err := b.DeleteRange(appendShard(view.key(tag, 2), sr.First), appendShard(view.key(tag, 2), sr.Last+1), nil); err != nil {
			return err
		}
	}
	tables, err := view.indexTables(r, sr.Contains)
	if err != nil {
		return err
	}
	for name := range tables {
		if err := b.DeleteRange(view.indexBase(name, sr.First), view.indexBase(name, sr.Last+1), nil); err != nil {
			return err
		}
		if err := b.DeleteRange(view.indexDefKey(name, sr.First), view.indexDefKey(name, sr.Last+1), nil); err != nil {
			return err
		}
	}
	return nil
}

// prefixFor returns the generation prefix that holds keys of tag: the shards' for shard-keyed
// tags, the state's for the others.
func (pp *pebblePart) prefixFor(tag byte) []byte {
	if shardTag(tag) {
		return pp.cellPrefix
	}
	return pp.prefix
}

// sameShards reports whether two views keep their shards' data under one generation.
func (pp *pebblePart) sameShards(o *pebblePart) bool { return bytes.Equal(pp.cellPrefix, o.cellPrefix) }
