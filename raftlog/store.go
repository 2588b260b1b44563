package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	dto "github.com/prometheus/client_model/go"

	"github.com/schemaless-db/schemaless/internal/pebblelog"
)

// Options configures a Store. Zero fields take the defaults of DefaultOptions.
type Options struct {
	// CacheBytes is pebble's block cache, for reads of entries that are no longer in raft's
	// log cache or the memtable (a follower far behind, a restart). Default 8 MiB.
	CacheBytes int64
	// MemTableBytes is the size of one memtable: appends are kept in memory up to this size
	// before pebble writes them into a table file. Pebble keeps at most two memtables before
	// it stalls appends, so a node's log store holds about twice this in memory. Default 16 MiB.
	MemTableBytes uint64
	// Logger receives pebble's errors (its informational lines go to Debug). Default
	// slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the options a node uses.
func DefaultOptions() Options {
	return Options{CacheBytes: 8 << 20, MemTableBytes: 16 << 20, Logger: slog.Default()}
}

// Store is one node's raft log store: a pebble database in one directory that holds the logs and
// the stable state of every raft group of the node (see Group). Safe for concurrent use.
type Store struct {
	db     *pebble.DB
	dir    string
	mu     sync.Mutex
	open   map[string]*Group // groups handed out and not closed
	closed bool
	// appends and entries count StoreLogs calls that stored something, and their entries.
	appends, entries atomic.Uint64
}

// Stats are a Store's counts since it was opened.
type Stats struct {
	// Appends is how many StoreLogs calls stored entries, over all groups; Entries how many
	// entries they stored.
	Appends, Entries uint64
	// Syncs is how many times pebble synced its write-ahead log. With appends of several
	// groups arriving together, Syncs stays below Appends: that is the group commit.
	Syncs uint64
}

// Stats returns the store's counts. Safe to call at any time, also after Close (then Syncs is
// 0).
func (s *Store) Stats() Stats {
	st := Stats{Appends: s.appends.Load(), Entries: s.entries.Load()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		var m dto.Metric
		if h := s.db.Metrics().LogWriter.FsyncLatency; h != nil && h.Write(&m) == nil && m.Histogram != nil {
			st.Syncs = m.Histogram.GetSampleCount()
		}
	}
	return st
}

// ErrClosed: a call on a closed Store or Group.
var ErrClosed = errors.New("raftlog: closed")

// ErrGroupOpen: Group or Drop named a group that is open.
var ErrGroupOpen = errors.New("raftlog: the group is open")

// Open opens (creating if missing) the store in directory dir. Only one Store may have dir open
// at a time: pebble locks the directory, and a second Open fails. Errors are pebble's (a
// corrupt or locked directory) or the directory's creation.
func Open(dir string, opts Options) (*Store, error) {
	d := DefaultOptions()
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = d.CacheBytes
	}
	if opts.MemTableBytes == 0 {
		opts.MemTableBytes = d.MemTableBytes
	}
	if opts.Logger == nil {
		opts.Logger = d.Logger
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	// Pebble reserves its memtables' memory in the block cache: CacheBytes is for blocks,
	// besides the two memtables it may hold.
	cache := pebble.NewCache(opts.CacheBytes + 2*int64(opts.MemTableBytes))
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		Cache:                       cache,
		MemTableSize:                opts.MemTableBytes,
		MemTableStopWritesThreshold: 2,
		Logger:                      pebblelog.Logger{L: opts.Logger.With("raftlog", dir), Panic: "raftlog"},
	})
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	return &Store{db: db, dir: dir, open: map[string]*Group{}}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Group opens the view of group name (any string without a 0x00 byte, e.g. "trips/3"): its log
// and stable state, empty for a name the store has not seen. A name can be open once at a time;
// Group.Close releases it. Errors: ErrGroupOpen, ErrClosed, a bad name, or reading its bounds.
func (s *Store) Group(name string) (*Group, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.open[name] != nil {
		return nil, fmt.Errorf("%w: %q", ErrGroupOpen, name)
	}
	g := &Group{s: s, name: name, logPrefix: prefix('L', name), stablePrefix: prefix('S', name)}
	var err error
	if g.first, g.last, err = s.bounds(g.logPrefix); err != nil {
		return nil, err
	}
	s.open[name] = g
	return g, nil
}

// HasState reports whether group name holds any entry or stable value (a replica's raft state).
// Errors: ErrClosed, a bad name, or pebble's.
func (s *Store) HasState(name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	for _, p := range [][]byte{prefix('L', name), prefix('S', name)} {
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: end(p)})
		if err != nil {
			return false, err
		}
		found := it.First()
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// Drop deletes every entry and stable value of group name, durably, for a replica that leaves
// the node. The group must not be open. Errors: ErrGroupOpen, ErrClosed, a bad name, or pebble's.
func (s *Store) Drop(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.open[name] != nil {
		return fmt.Errorf("%w: %q", ErrGroupOpen, name)
	}
	b := s.db.NewBatch()
	for _, p := range [][]byte{prefix('L', name), prefix('S', name)} {
		if err := b.DeleteRange(p, end(p), nil); err != nil {
			return err
		}
	}
	return s.db.Apply(b, pebble.Sync)
}

// Close closes the store. Groups still open fail with ErrClosed from then on. Idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, g := range s.open {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
	}
	return s.db.Close()
}

// bounds reads the first and last index of the entries under a log prefix (0, 0 when none).
func (s *Store) bounds(p []byte) (first, last uint64, err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: end(p)})
	if err != nil {
		return 0, 0, err
	}
	if it.First() {
		first = binary.BigEndian.Uint64(it.Key()[len(p):])
		if it.Last() {
			last = binary.BigEndian.Uint64(it.Key()[len(p):])
		}
	}
	return first, last, errors.Join(it.Error(), it.Close())
}

// checkName refuses names that would make key ranges overlap.
func checkName(name string) error {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("raftlog: group name %q: want a non-empty name without a 0x00 byte", name)
	}
	return nil
}

// prefix is kind + name + 0x00.
func prefix(kind byte, name string) []byte {
	p := make([]byte, 0, len(name)+2)
	p = append(p, kind)
	p = append(p, name...)
	return append(p, 0)
}

// end is the first key after every key that starts with p (p ends in 0x00, so 0x01 ends it).
func end(p []byte) []byte {
	e := append([]byte(nil), p...)
	e[len(e)-1] = 1
	return e
}
