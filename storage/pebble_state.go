package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"
)

// The KV rows and request records of a pebble partition.

// kvKey is the key of KV row key.
func (pp *pebblePart) kvKey(key string) []byte { return append(pp.key(tagKV, len(key)), key...) }

// pebblePutKV is PutKV on pebble.
func (tx *WriteTx) pebblePutKV(key string, value []byte) error {
	if err := tx.b.Set(tx.p.pb.kvKey(key), value, nil); err != nil {
		return tx.p.fail(fmt.Sprintf("put KV %q (%d bytes)", key, len(value)), err)
	}
	return nil
}

// pebbleDeleteKV is DeleteKV on pebble.
func (tx *WriteTx) pebbleDeleteKV(key string) error {
	if err := tx.b.Delete(tx.p.pb.kvKey(key), nil); err != nil {
		return tx.p.fail(fmt.Sprintf("delete KV %q", key), err)
	}
	return nil
}

// pebbleReplaceKV is ReplaceKV on pebble: one range deletion, then the rows.
func (tx *WriteTx) pebbleReplaceKV(kvs []KV) error {
	pre := tx.p.pb.key(tagKV, 0)
	end, _ := prefixEnd(string(pre))
	if err := tx.b.DeleteRange(pre, end, nil); err != nil {
		return tx.p.fail("replace KV rows", err)
	}
	seen := make(map[string]bool, len(kvs))
	for i := range kvs {
		if seen[kvs[i].Key] {
			return fmt.Errorf("storage: replace KV rows: %w: key %q given twice", ErrDuplicate, kvs[i].Key)
		}
		seen[kvs[i].Key] = true
		if err := tx.pebblePutKV(kvs[i].Key, kvs[i].Value); err != nil {
			return err
		}
	}
	return nil
}

// scanKVIn returns the KV rows of r whose key starts with prefix, in key order.
func (pp *pebblePart) scanKVIn(r reader, prefix string) ([]KV, error) {
	it, err := prefixIter(r, pp.kvKey(prefix))
	if err != nil {
		return nil, err
	}
	var out []KV
	n := dataPrefixLen + 1
	for it.First(); it.Valid(); it.Next() {
		out = append(out, KV{Key: string(it.Key()[n:]), Value: bytes.Clone(it.Value())})
	}
	return out, errors.Join(it.Error(), it.Close())
}

// pebbleScanKV is ScanKV on pebble.
func (p *PartitionStore) pebbleScanKV(prefix string) ([]KV, error) {
	defer p.pb.rlock()()
	out, err := p.pb.scanKVIn(p.pb.db, prefix)
	if err != nil {
		return nil, p.fail(fmt.Sprintf("scan KV prefix %q", prefix), err)
	}
	return out, nil
}

// requestKey is the key of request record id; requestTimeKey its entry in time order.
func (pp *pebblePart) requestKey(id uuid.UUID) []byte {
	return append(pp.key(tagRequest, 16), id[:]...)
}

func (pp *pebblePart) requestTimeKey(micros int64, id uuid.UUID) []byte {
	return append(appendI64(pp.key(tagRequestTime, 24), micros), id[:]...)
}

// requestValue encodes r's created_at and record.
func requestValue(r *RequestRecord) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(r.Record)), uint64(r.CreatedAt.UnixMicro())), r.Record...)
}

// decodeRequest decodes the record of id from its value v (copied).
func decodeRequest(id uuid.UUID, v []byte) (RequestRecord, error) {
	if len(v) < 8 {
		return RequestRecord{}, errBadValue
	}
	return RequestRecord{ID: id, CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(v))).UTC(), Record: bytes.Clone(v[8:])}, nil
}

// pebbleLookupRequests is LookupRequests on pebble: a point read per ID through the batch.
func (tx *WriteTx) pebbleLookupRequests(ids []uuid.UUID) (map[uuid.UUID]RequestRecord, error) {
	out := make(map[uuid.UUID]RequestRecord, len(ids))
	for _, id := range ids {
		v, ok, err := getCopy(tx.b, tx.p.pb.requestKey(id))
		if err != nil {
			return nil, tx.p.fail("look up request records", err)
		}
		if !ok {
			continue
		}
		r, err := decodeRequest(id, v)
		if err != nil {
			return nil, tx.p.fail("look up request records", err)
		}
		out[id] = r
	}
	return out, nil
}

// pebblePutRequests is PutRequests (upsert) and InsertRequests on pebble. Without upsert an ID
// that is stored, or given twice, returns ErrDuplicate and nothing of rs is written.
func (tx *WriteTx) pebblePutRequests(rs []RequestRecord, upsert bool) error {
	err := tx.p.pb.putRequests(tx.b, rs, upsert)
	if err != nil && !errors.Is(err, ErrDuplicate) {
		return tx.p.fail(fmt.Sprintf("store %d request records", len(rs)), err)
	}
	if err == nil {
		for i := range rs {
			tx.touched = append(tx.touched, rs[i].ID)
		}
	}
	return err
}

// putRequests writes rs through w: with upsert replacing stored records of their IDs, without
// refusing (ErrDuplicate, nothing written) an ID that is stored or given twice.
func (pp *pebblePart) putRequests(w writer, rs []RequestRecord, upsert bool) error {
	if !upsert {
		if err := pp.checkNewRequests(w, rs); err != nil {
			return err
		}
	}
	for i := range rs {
		r := &rs[i]
		k := pp.requestKey(r.ID)
		if upsert {
			old, ok, err := getCopy(w, k)
			if err != nil {
				return err
			}
			if ok && len(old) >= 8 {
				if err := w.Delete(pp.requestTimeKey(int64(binary.BigEndian.Uint64(old)), r.ID), nil); err != nil {
					return err
				}
			}
		}
		if err := w.Set(k, requestValue(r), nil); err != nil {
			return err
		}
		if err := w.Set(pp.requestTimeKey(r.CreatedAt.UnixMicro(), r.ID), nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// checkNewRequests returns ErrDuplicate when an ID of rs is stored in w or given twice. Up to
// two IDs are point reads; more are looked up in order through one iterator: time-ordered IDs (UUIDv7, as nodes and the Go
// client make them) of new writes sort after nearly every stored one, so one seek answers most
// batches, and the stored IDs met between two of rs are stepped over (or sought past, when
// many).
func (pp *pebblePart) checkNewRequests(w writer, rs []RequestRecord) error {
	if len(rs) <= 2 {
		// An iterator costs more than a point read or two (an entry of one write, at low load).
		for i := range rs {
			dup, err := exists(w, pp.requestKey(rs[i].ID))
			if err != nil {
				return err
			}
			if dup || i == 1 && rs[0].ID == rs[1].ID {
				return fmt.Errorf("storage: insert %d request records: %w: ID %s is stored or given twice", len(rs), ErrDuplicate, rs[i].ID)
			}
		}
		return nil
	}
	keys := make([][]byte, len(rs))
	for i := range rs {
		keys[i] = pp.requestKey(rs[i].ID)
	}
	slices.SortFunc(keys, bytes.Compare)
	it, err := prefixIter(w, pp.key(tagRequest, 0))
	if err != nil {
		return err
	}
	defer it.Close()
	const maxSteps = 8
	ok := it.SeekGE(keys[0])
	for i, k := range keys {
		if i > 0 && bytes.Equal(k, keys[i-1]) {
			return fmt.Errorf("storage: insert %d request records: %w: ID %x given twice", len(rs), ErrDuplicate, k[len(k)-16:])
		}
		for steps := 0; ok && bytes.Compare(it.Key(), k) < 0; steps++ {
			if steps == maxSteps {
				ok = it.SeekGE(k)
				break
			}
			ok = it.Next()
		}
		if ok && bytes.Equal(it.Key(), k) {
			return fmt.Errorf("storage: insert %d request records: %w: ID %x is stored", len(rs), ErrDuplicate, k[len(k)-16:])
		}
		if !ok {
			break
		}
	}
	return it.Error()
}

// pebblePruneRequests is PruneRequests on pebble: the oldest records first, through the time
// order.
func (tx *WriteTx) pebblePruneRequests(before time.Time, limit int) (int64, error) {
	pp := tx.p.pb
	pre := pp.key(tagRequestTime, 0)
	it, err := tx.b.NewIter(&pebble.IterOptions{LowerBound: pre, UpperBound: appendI64(bytes.Clone(pre), before.UnixMicro())})
	if err != nil {
		return 0, tx.p.fail("prune request records", err)
	}
	var del [][]byte
	for it.First(); it.Valid() && len(del) < 2*limit; it.Next() {
		k := it.Key()
		if len(k) != len(pre)+24 {
			it.Close()
			return 0, tx.p.fail("prune request records", errBadValue)
		}
		id, _ := uuid.FromBytes(k[len(pre)+8:])
		del = append(del, bytes.Clone(k), pp.requestKey(id))
		tx.touched = append(tx.touched, id)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, tx.p.fail("prune request records", err)
	}
	for _, k := range del {
		if err := tx.b.Delete(k, nil); err != nil {
			return 0, tx.p.fail("prune request records", err)
		}
	}
	return int64(len(del) / 2), nil
}
