package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/storage"
)

// Consistency of a read.
type Consistency string

// Read consistencies.
const (
	// Strong reads reflect every write acknowledged before the read started: a raft replica
	// serves them as the leader after a read index (else *NotLeaderError), an async partition
	// from its primary master.
	Strong Consistency = "strong"
	// Stale reads are served by this replica (raft) or by a minion of the storage cluster
	// (async; the master when no minion answers) and may miss recent writes.
	Stale Consistency = "stale"
)

// boundedPrefix starts a bounded stale Consistency, followed by the bound in nanoseconds.
const boundedPrefix = "stale<="

// MaxStalenessLimit bounds BoundedStale's bound.
const MaxStalenessLimit = time.Hour

// BoundedStale returns the consistency of a stale read whose data must be at most d old: it
// reflects every write acknowledged before d ago, or the read is refused (ErrTooStale) by the
// replica asked. d is in (0, MaxStalenessLimit].
func BoundedStale(d time.Duration) Consistency {
	return Consistency(boundedPrefix + strconv.FormatInt(int64(d), 10))
}

// MaxStaleness returns the bound of a BoundedStale consistency, and false for any other.
func (c Consistency) MaxStaleness() (time.Duration, bool) {
	s, ok := strings.CutPrefix(string(c), boundedPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || time.Duration(n) > MaxStalenessLimit {
		return 0, false
	}
	return time.Duration(n), true
}

// IsStale reports whether c is Stale or bounded stale: a read any replica may serve.
func (c Consistency) IsStale() bool {
	_, bounded := c.MaxStaleness()
	return c == Stale || bounded
}

// Valid reports whether c is Strong, Stale or a BoundedStale within its limits.
func (c Consistency) Valid() bool { return c == Strong || c.IsStale() }

// ErrBadRead: a ReadRequest that sets no kind or more than one, or an index read whose
// fields do not fit its plan. Nothing was read.
var ErrBadRead = errors.New("partition: bad read request")

// ReadRequest is one read of a partition's tables. Exactly one field is set; it says the kind
// of read and carries its arguments. The type travels between nodes as it is (MessagePack), so
// a forwarded read is the same value as a local one.
type ReadRequest struct {
	Get        *GetRead
	Row        *RowRead
	Log        *LogRead
	Group      *GroupRead
	Groups     *GroupsRead
	Catalog    *CatalogRead
	FirstCells *FirstCellsRead
	Index      *IndexRead
	IndexStats *IndexStatsRead
	Versions   *VersionsRead
	// Schemas and SchemaCheck: see schema.go.
	Schemas     *SchemasRead
	SchemaCheck *SchemaCheckRead
}

// VersionsRead reads the versions of one column of a row: its cells in ref key order,
// ascending from From (inclusive; nil: from the lowest) or, with Desc, descending from From
// (inclusive; nil: from the highest), at most Limit (positive) of them. Shard is the row key's
// shard. The answer is ReadResult.Cells.
type VersionsRead struct {
	Shard     int
	RowKey    uuid.UUID
	ColumnKey string
	From      *int64
	Limit     int
	Desc      bool
}

// GetRead reads cells by key. The answer is ReadResult.Get, one GetResult per key, in order.
type GetRead struct {
	Keys []GetKey
}

// GetKey is one key of a GetRead: the exact key, or with Latest the highest ref key of the row
// key and column key (Key.RefKey ignored). Shard is the key's shard (cells.ShardOf of the row
// key and the datastore's shard count); it must be one of the partition's.
type GetKey struct {
	Shard  int
	Key    cells.Key
	Latest bool
}

// GetResult is the answer for one GetKey: the cell, or Found false.
//
// Every key of one GetRead is read in one read transaction of the partition's tables (a
// snapshot: storage.PartitionStore.GetSnapshot); AppliedIndex is the raft index that snapshot
// reflects (0 in async mode, which has none), the same for every key of the read. Partition is
// set by cluster.GetCells, which reads several partitions.
type GetResult struct {
	Cell         cells.Cell
	Found        bool
	Partition    int
	AppliedIndex uint64
}

// RowRead reads the latest cell of every column of a row. The answer is ReadResult.Cells.
type RowRead struct {
	Shard  int
	RowKey uuid.UUID
}

// Location types of a log read.
const (
	// LocationAddedID: Location is an added_id; the read returns the cells after it.
	LocationAddedID = "added_id"
	// LocationTimestamp: the read starts at the first cell created at or after LogRead.Time.
	LocationTimestamp = "timestamp"
)

// ShardLocation is where to read one shard's log from.
type ShardLocation struct {
	Shard    int
	Location int64
}

// LogPage is the answer for one shard: its cells in added_id order, the location to read on
// from, and HighWater, the shard's highest added_id when the page was read.
type LogPage struct {
	Shard        int
	Cells        []cells.Cell
	NextLocation int64
	HighWater    int64
}

// LogRead reads the logs of some of the partition's shards. The answer is ReadResult.Pages,
// one LogPage per shard, in order.
type LogRead struct {
	// Shards to read, each after its Location (ignored for LocationTimestamp).
	Shards []ShardLocation
	// LocationType is LocationAddedID (default when "") or LocationTimestamp.
	LocationType string
	// Time is the start of a LocationTimestamp read.
	Time time.Time
	// ColumnKey, when set, keeps only the cells of that column and the tombstones of erased
	// rows (cells.TombstoneColumn).
	ColumnKey string
	// Limit bounds the cells returned per shard.
	Limit int
	// Wait, when positive, long-polls: if no shard has a cell to return, the read waits until
	// one has (a raft replica wakes when its state machine applies an entry, an async
	// partition re-reads every 50 ms) or Wait passes (then it answers with no cells).
	Wait time.Duration
}

// GroupRead reads the coordinator state of a consumer group. The answer is ReadResult.Group,
// nil when the group does not exist. Shards is the datastore's shard count: a partition that
// does not hold the group's coordinator shard (consumer.CoordinatorShard) refuses the read
// with command.ErrShardOutOfRange, since a split or merge gave the group to another partition
// and what it holds of it is an old copy. 0 (a node of a build before the check) reads
// whatever copy the partition holds.
type GroupRead struct {
	Group  string
	Shards int
}

// GroupsRead lists the consumer groups whose coordinator state the partition holds. The answer
// is ReadResult.Groups. With Shards (the datastore's shard count) set, only the groups whose
// coordinator shard the partition holds are listed (after a split, both halves keep a copy of
// every group's rows until a merge); 0 lists every group it has rows of.
type GroupsRead struct {
	Shards int
}

// CatalogRead reads the datastore's index catalog held by the partition (the one holding the
// catalog shard). The answer is ReadResult.Catalog, encoded (indexes.DecodeCatalog); a raft
// replica hands the same slice to every read until its state machine applies another entry, so
// the caller must not modify it.
type CatalogRead struct{}

// FirstCellsRead reads, for row keys of one shard, the first cell of Column appended for each
// (lowest added_id; see storage.PartitionStore.FirstCells). The answer is ReadResult.Cells:
// the cells found, in the order of RowKeys. With AtLeast > 0, a replica whose shard log ends
// before added_id AtLeast refuses the read (ErrUnavailable) rather than answer from an older
// state: its first cell of a row may be one an erasure it has not applied yet deleted.
type FirstCellsRead struct {
	Shard   int
	Column  string
	RowKeys []uuid.UUID
	AtLeast int64
}

// IndexRead runs an index query (indexes.Compile's plan) against index table Table (of
// Fields, the shard field first) on index shard Shard. Plan's values travel packed: build it
// with PackIndexPlan. The answer is ReadResult.Entries, values packed: type them with
// UnpackIndexEntries.
type IndexRead struct {
	Table  string
	Fields []indexes.Field
	Plan   indexes.Plan
	Shard  int
}

// IndexStatsRead counts the entries and violations of index table Table (of Fields) in the
// partition. The answer is ReadResult.Stats.
type IndexStatsRead struct {
	Table  string
	Fields []indexes.Field
}

// IndexStats counts the entries of one index table.
type IndexStats struct {
	// Entries is the number of index entries (one per row key).
	Entries int64
	// Violations counts entries whose shard field a later cell tried to change.
	Violations int64
}

// IndexEntry is an index entry as a read answers it: values packed (command.PackIndexValues),
// refs encoded (indexes.EncodeRefs).
type IndexEntry struct {
	RowKey    uuid.UUID
	Values    []any
	Refs      []byte
	Violation int64
}

// ReadResult is the answer to a ReadRequest: the field of the request's kind is set (see each
// kind's documentation), the others are zero.
type ReadResult struct {
	Get     []GetResult
	Cells   []cells.Cell
	Pages   []LogPage
	Group   *consumer.Status
	Groups  []string
	Catalog []byte
	Entries []IndexEntry
	Stats   IndexStats
	// Schemas and SchemaCheck answer the reads of schema.go.
	Schemas     []schemas.Version
	SchemaCheck *SchemaCheck
}

// check returns ErrBadRead unless exactly one kind is set.
func (r ReadRequest) check() error {
	n := 0
	for _, set := range []bool{r.Get != nil, r.Row != nil, r.Log != nil, r.Group != nil, r.Groups != nil,
		r.Catalog != nil, r.FirstCells != nil, r.Index != nil, r.IndexStats != nil, r.Versions != nil,
		r.Schemas != nil, r.SchemaCheck != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("%w: %d kinds set, want exactly one", ErrBadRead, n)
	}
	if r.Group != nil && r.Group.Shards < 0 {
		return fmt.Errorf("%w: group read of %q: shards %d is negative", ErrBadRead, r.Group.Group, r.Group.Shards)
	}
	if r.Groups != nil && r.Groups.Shards < 0 {
		return fmt.Errorf("%w: groups read: shards %d is negative", ErrBadRead, r.Groups.Shards)
	}
	return nil
}

// logWatch tells a long poll when to read again, and what it may skip: the state machine of a
// raft replica, or an async partition (which polls).
type logWatch interface {
	AppliedChanged() <-chan struct{}
	HighWater(shard int) (int64, bool)
}

// query runs req against st, the partition's tables on this replica (raft) or on a member of
// its storage cluster (async). shards is the partition's range; watch paces long polls.
func query(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, watch logWatch, req ReadRequest) (ReadResult, error) {
	var res ReadResult
	var err error
	switch {
	case req.Get != nil:
		res.Get, err = getCells(ctx, st, shards, req.Get.Keys)
	case req.Row != nil:
		if err = inRange(shards, req.Row.Shard); err == nil {
			if res.Cells, err = st.GetRow(ctx, req.Row.Shard, req.Row.RowKey); err != nil {
				err = fmt.Errorf("partition: read row %s: %w", req.Row.RowKey, err)
			}
		}
	case req.Log != nil:
		res.Pages, err = readLog(ctx, st, shards, watch, *req.Log)
	case req.Group != nil:
		if n := req.Group.Shards; n > 0 {
			err = inRange(shards, consumer.CoordinatorShard(req.Group.Group, n))
		}
		if err == nil {
			res.Group, err = groupStatus(ctx, st, req.Group.Group)
		}
	case req.Groups != nil:
		res.Groups, err = groupNames(ctx, st, shards, req.Groups.Shards)
	case req.Catalog != nil:
		var c *indexes.Catalog
		if c, err = fsm.LoadCatalog(ctx, st); err == nil {
			res.Catalog, err = indexes.EncodeCatalog(c)
		}
	case req.FirstCells != nil:
		res.Cells, err = firstCells(ctx, st, shards, *req.FirstCells)
	case req.Index != nil:
		res.Entries, err = queryIndex(ctx, st, shards, *req.Index)
	case req.Versions != nil:
		v := req.Versions
		switch {
		case v.Limit < 1:
			err = fmt.Errorf("%w: versions limit %d is not positive", ErrBadRead, v.Limit)
		case cells.ValidateColumnKey(v.ColumnKey) != nil:
			err = fmt.Errorf("%w: versions of column %q: %w", ErrBadRead, v.ColumnKey, cells.ValidateColumnKey(v.ColumnKey))
		default:
			if err = inRange(shards, v.Shard); err == nil {
				res.Cells, err = st.GetVersions(ctx, v.Shard, v.RowKey, v.ColumnKey, v.From, v.Limit, v.Desc)
			}
		}
	case req.IndexStats != nil:
		t := fsm.IndexTableOf(req.IndexStats.Table, req.IndexStats.Fields)
		res.Stats.Entries, res.Stats.Violations, err = st.IndexStats(ctx, t)
	case req.Schemas != nil:
		res.Schemas, err = readSchemas(ctx, st, *req.Schemas)
	case req.SchemaCheck != nil:
		res.SchemaCheck, err = checkSchema(ctx, st, shards, *req.SchemaCheck)
	default:
		err = req.check()
	}
	if err != nil {
		return ReadResult{}, err
	}
	return res, nil
}

// inRange returns command.ErrShardOutOfRange unless shard is one of shards.
func inRange(shards cells.ShardRange, shard int) error {
	if !shards.Contains(shard) {
		return fmt.Errorf("%w: shard %d, partition holds %d..%d", command.ErrShardOutOfRange, shard, shards.First, shards.Last)
	}
	return nil
}

func getCells(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, keys []GetKey) ([]GetResult, error) {
	sk := make([]storage.SnapshotKey, len(keys))
	for i, k := range keys {
		if err := inRange(shards, k.Shard); err != nil {
			return nil, fmt.Errorf("partition: read %s: %w", k.Key, err)
		}
		sk[i] = storage.SnapshotKey{Shard: k.Shard, Key: k.Key, Latest: k.Latest}
	}
	cs, found, applied, err := st.GetSnapshot(ctx, sk)
	if err != nil {
		return nil, fmt.Errorf("partition: read %d keys: %w", len(keys), err)
	}
	out := make([]GetResult, len(keys))
	for i := range keys {
		out[i] = GetResult{Cell: cs[i], Found: found[i], AppliedIndex: applied.Index}
	}
	return out, nil
}

// groupNames lists the groups st holds rows of; with shards > 0 (the datastore's shard count)
// only those coordinated by a shard of r.
func groupNames(ctx context.Context, st *storage.PartitionStore, r cells.ShardRange, shards int) ([]string, error) {
	names, err := fsm.GroupNames(ctx, st)
	if err != nil || shards < 1 {
		return names, err
	}
	return slices.DeleteFunc(names, func(g string) bool { return !r.Contains(consumer.CoordinatorShard(g, shards)) }), nil
}

func groupStatus(ctx context.Context, st *storage.PartitionStore, group string) (*consumer.Status, error) {
	g, err := fsm.LoadGroup(ctx, st, group)
	if err != nil || !g.Exists() {
		return nil, err
	}
	s := g.Status(time.Now())
	return &s, nil
}

func firstCells(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, req FirstCellsRead) ([]cells.Cell, error) {
	if err := inRange(shards, req.Shard); err != nil {
		return nil, err
	}
	if req.AtLeast > 0 {
		// Read before the cells: what the cells' read sees is at least as new.
		high, err := st.MaxAddedID(ctx, req.Shard)
		if err != nil {
			return nil, err
		}
		if high < req.AtLeast {
			return nil, fmt.Errorf("%w: shard %d of this replica ends at added_id %d, the read needs %d", ErrUnavailable, req.Shard, high, req.AtLeast)
		}
	}
	m, err := st.FirstCells(ctx, req.Shard, req.Column, req.RowKeys)
	if err != nil {
		return nil, err
	}
	var out []cells.Cell
	for _, rk := range req.RowKeys {
		if c, ok := m[rk]; ok {
			out = append(out, c)
			delete(m, rk)
		}
	}
	return out, nil
}

// readLog serves a log read from st (already read-indexed for strong reads on raft),
// long-polling on watch.
func readLog(ctx context.Context, st *storage.PartitionStore, shards cells.ShardRange, watch logWatch, req LogRead) ([]LogPage, error) {
	locs := make([]int64, len(req.Shards))
	for i, sl := range req.Shards {
		if err := inRange(shards, sl.Shard); err != nil {
			return nil, err
		}
		locs[i] = sl.Location
		if req.LocationType == LocationTimestamp {
			loc, err := st.LocationAt(ctx, sl.Shard, req.Time)
			if err != nil {
				return nil, fmt.Errorf("partition: location of %s in shard %d: %w", req.Time.Format(time.RFC3339Nano), sl.Shard, err)
			}
			locs[i] = loc
		}
	}
	var deadline <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		changed := watch.AppliedChanged() // taken before reading, so no apply is missed
		pages := make([]LogPage, len(req.Shards))
		found := false
		for i, sl := range req.Shards {
			pages[i] = LogPage{Shard: sl.Shard, NextLocation: locs[i]}
			if h, ok := watch.HighWater(sl.Shard); ok && h <= locs[i] {
				pages[i].HighWater = h
				continue // nothing new: no SQL
			}
			cs, next, high, err := st.ReadLog(ctx, sl.Shard, locs[i], req.ColumnKey, req.Limit)
			if err != nil {
				return nil, fmt.Errorf("partition: read log of shard %d: %w", sl.Shard, err)
			}
			pages[i] = LogPage{Shard: sl.Shard, Cells: cs, NextLocation: next, HighWater: high}
			locs[i] = next
			found = found || len(cs) > 0
		}
		if found || deadline == nil {
			return pages, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return pages, nil
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return pages, nil
			}
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}
