package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/hashicorp/raft"
)

// Group is one raft group's log and stable state in a Store: a raft.LogStore and
// raft.StableStore. Writes return once durable (see the package documentation). Safe for
// concurrent use.
type Group struct {
	s            *Store
	name         string
	logPrefix    []byte
	stablePrefix []byte
	mu           sync.RWMutex
	first, last  uint64 // bounds of the stored entries; 0, 0 when there are none
	closed       bool
}

var (
	_ raft.LogStore          = (*Group)(nil)
	_ raft.StableStore       = (*Group)(nil)
	_ raft.MonotonicLogStore = (*Group)(nil)
)

// errNotFound is what hashicorp/raft expects of a StableStore for a missing key: it compares
// the error's text with "not found" (api.go, raft.go).
var errNotFound = errors.New("not found")

// ErrNotContiguous: StoreLogs was given entries that do not follow the group's last index (raft
// never does; a caller that did would leave a gap in the log).
var ErrNotContiguous = errors.New("raftlog: entries do not follow the last index")

// IsMonotonic is true: StoreLogs refuses a gap (ErrNotContiguous), so raft deletes the whole
// log when it installs a snapshot (raft.MonotonicLogStore) instead of keeping old entries and
// appending after the snapshot's index.
func (g *Group) IsMonotonic() bool { return true }

// Name is the group's name.
func (g *Group) Name() string { return g.name }

// Close releases the group's name in its store; the store stays open. Idempotent.
func (g *Group) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.s.mu.Lock()
	if g.s.open[g.name] == g {
		delete(g.s.open, g.name)
	}
	g.s.mu.Unlock()
	return nil
}

// FirstIndex is the index of the first stored entry, 0 when there is none.
func (g *Group) FirstIndex() (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return 0, ErrClosed
	}
	return g.first, nil
}

// LastIndex is the index of the last stored entry, 0 when there is none.
func (g *Group) LastIndex() (uint64, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return 0, ErrClosed
	}
	return g.last, nil
}

// GetLog reads the entry at index into out. Errors: raft.ErrLogNotFound, ErrClosed, a corrupt
// value, or pebble's.
func (g *Group) GetLog(index uint64, out *raft.Log) error {
	if g.isClosed() {
		return ErrClosed
	}
	v, c, err := g.s.db.Get(g.logKey(index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if err := decode(v, out); err != nil {
		return fmt.Errorf("raftlog: group %q entry %d: %w", g.name, index, err)
	}
	out.Index = index
	return nil
}

// StoreLog appends one entry (see StoreLogs).
func (g *Group) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries with consecutive indexes that follow the last stored one (or start
// a log that holds none) and returns once they are durable. Errors: ErrNotContiguous, ErrClosed,
// or pebble's; on an error nothing of the call is stored.
func (g *Group) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	g.mu.RLock()
	first, last, closed := g.first, g.last, g.closed
	g.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	for i, l := range logs {
		if (i > 0 && l.Index != logs[i-1].Index+1) || (i == 0 && last != 0 && l.Index != last+1) {
			return fmt.Errorf("%w: group %q holds %d..%d, got entry %d", ErrNotContiguous, g.name, first, last, l.Index)
		}
	}
	b := g.s.db.NewBatch()
	defer b.Close()
	var key, val []byte
	for _, l := range logs {
		key = appendIndex(append(key[:0], g.logPrefix...), l.Index)
		val = encode(val[:0], l)
		if err := b.Set(key, val, nil); err != nil {
			return err
		}
	}
	if err := g.s.db.Apply(b, pebble.Sync); err != nil {
		return err
	}
	g.s.appends.Add(1)
	g.s.entries.Add(uint64(len(logs)))
	g.mu.Lock()
	if g.first == 0 {
		g.first = logs[0].Index
	}
	g.last = logs[len(logs)-1].Index
	g.mu.Unlock()
	return nil
}

// DeleteRange deletes the entries min..max inclusive, durably: raft deletes a prefix after a
// snapshot, a suffix that conflicts with a new leader's log, or everything when it installs a
// snapshot. Errors: ErrClosed or pebble's.
func (g *Group) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	if g.isClosed() {
		return ErrClosed
	}
	b := g.s.db.NewBatch()
	defer b.Close()
	hi := g.logKey(max + 1)
	if max == ^uint64(0) {
		hi = end(g.logPrefix)
	}
	if err := b.DeleteRange(g.logKey(min), hi, nil); err != nil {
		return err
	}
	if err := g.s.db.Apply(b, pebble.Sync); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.first == 0 || max < g.first || min > g.last:
	case min <= g.first && max >= g.last:
		g.first, g.last = 0, 0
	case min <= g.first:
		g.first = max + 1
	case max >= g.last:
		g.last = min - 1
	default:
		// A hole in the middle, which raft never asks for: the bounds stay true.
	}
	return nil
}

// Set stores a stable value durably. Errors: ErrClosed or pebble's.
func (g *Group) Set(key, val []byte) error {
	if g.isClosed() {
		return ErrClosed
	}
	return g.s.db.Set(append(append([]byte(nil), g.stablePrefix...), key...), val, pebble.Sync)
}

// Get returns a stable value; a missing key is an error whose text is "not found", as raft
// expects. Errors: ErrClosed or pebble's.
func (g *Group) Get(key []byte) ([]byte, error) {
	if g.isClosed() {
		return nil, ErrClosed
	}
	v, c, err := g.s.db.Get(append(append([]byte(nil), g.stablePrefix...), key...))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return append([]byte(nil), v...), nil
}

// SetUint64 stores a stable uint64 (8 bytes, big-endian) durably.
func (g *Group) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 reads a stable uint64; a missing key is "not found" (see Get).
func (g *Group) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: group %q stable key %q holds %d bytes, want 8", g.name, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// isClosed reports whether the group or its store was closed.
func (g *Group) isClosed() bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.closed
}

func (g *Group) logKey(index uint64) []byte {
	return appendIndex(append(make([]byte, 0, len(g.logPrefix)+8), g.logPrefix...), index)
}

func appendIndex(b []byte, index uint64) []byte { return binary.BigEndian.AppendUint64(b, index) }

// valueVersion is the first byte of every stored entry.
const valueVersion = 1

// encode appends the value of entry l: valueVersion, uvarint term, type byte, varint append
// time (Unix nanoseconds, 0 for none), uvarint length and bytes of the extensions, then the
// data to the end. The index is in the key.
func encode(b []byte, l *raft.Log) []byte {
	b = append(b, valueVersion)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return append(b, l.Data...)
}

// errCorrupt: a stored value that encode did not write.
var errCorrupt = errors.New("corrupt entry")

// decode reads a value of encode into out (all but the index), copying the data out of v.
func decode(v []byte, out *raft.Log) error {
	if len(v) < 1 || v[0] != valueVersion {
		return errCorrupt
	}
	v = v[1:]
	term, n := binary.Uvarint(v)
	if n <= 0 || len(v) < n+1 {
		return errCorrupt
	}
	typ := v[n]
	v = v[n+1:]
	at, n := binary.Varint(v)
	if n <= 0 {
		return errCorrupt
	}
	v = v[n:]
	elen, n := binary.Uvarint(v)
	if n <= 0 || uint64(len(v)-n) < elen {
		return errCorrupt
	}
	v = v[n:]
	*out = raft.Log{Term: term, Type: raft.LogType(typ)}
	if elen > 0 {
		out.Extensions = append([]byte(nil), v[:elen]...)
	}
	if len(v) > int(elen) {
		out.Data = append([]byte(nil), v[elen:]...)
	}
	if at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	return nil
}
