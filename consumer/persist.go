package consumer

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// Row keys of a group, relative to the group.
const (
	// MetaRow is the key of the row holding everything but the shard leases.
	MetaRow = "meta"
	// ShardRowPrefix starts the key of a shard's lease row: "shard/<n>", n in decimal.
	ShardRowPrefix = "shard/"
)

// CoordinatorShard returns the shard whose partition holds the coordinator state of group in a
// datastore of shards shards: a stable hash (FNV-1a, 32 bits) of the name modulo the shard
// count.
func CoordinatorShard(group string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int(h.Sum32() % uint32(shards))
}

// ShardRow returns the key of shard s's lease row.
func ShardRow(s int) string { return ShardRowPrefix + strconv.Itoa(s) }

// metaRow is the MessagePack form of the "meta" row.
type metaRow struct {
	Clock         time.Time    `msgpack:"c"`
	Generation    uint64       `msgpack:"g"`
	Start         Start        `msgpack:"s"`
	Shards        int          `msgpack:"n"`
	HaltThreshold int          `msgpack:"ht"`
	Halted        bool         `msgpack:"h"`
	LastID        uint64       `msgpack:"id"`
	Members       []memberRow  `msgpack:"m"`
	Parked        []ParkedCell `msgpack:"p"`
}

// memberRow is a member in the meta row.
type memberRow struct {
	ID      string    `msgpack:"i"`
	Expires time.Time `msgpack:"x"`
}

// leaseRow is the MessagePack form of a "shard/<n>" row.
type leaseRow struct {
	Owner  string `msgpack:"w"`
	Epoch  uint64 `msgpack:"e"`
	Offset int64  `msgpack:"o"`
}

// Dirty returns the rows changed since New, Load or the last ResetDirty: put maps row keys
// ("meta", "shard/<n>") to their new values, del lists rows to delete, sorted (the lease rows
// of shards removed by a smaller shard count; no key is in both). Applying put and del to the
// rows g was loaded from gives rows that Load turns into a group equal to g. The maps and
// slices are the caller's; Dirty does not reset the set (see ResetDirty).
func (g *Group) Dirty() (put map[string][]byte, del []string) {
	put = map[string][]byte{}
	if g.metaDirty {
		put[MetaRow] = mustMarshal(g.meta())
	}
	for s := range g.shardDirty {
		l := g.leases[s]
		put[ShardRow(s)] = mustMarshal(leaseRow{Owner: l.owner, Epoch: l.epoch, Offset: l.offset})
	}
	for s := range g.shardDelete {
		del = append(del, ShardRow(s))
	}
	sort.Strings(del)
	return put, del
}

// ResetDirty empties the set of changed rows (after they were written).
func (g *Group) ResetDirty() {
	g.metaDirty = false
	clear(g.shardDirty)
	clear(g.shardDelete)
}

// meta returns the meta row of g.
func (g *Group) meta() metaRow {
	m := metaRow{
		Clock:         g.clock,
		Generation:    g.generation,
		Start:         g.start,
		Shards:        g.shards,
		HaltThreshold: g.haltThreshold,
		Halted:        g.halted,
		LastID:        g.lastID,
		Parked:        g.parked,
	}
	for _, id := range g.memberIDs() {
		m.Members = append(m.Members, memberRow{ID: id, Expires: g.members[id]})
	}
	return m
}

// mustMarshal encodes v, which holds only types MessagePack always encodes.
func mustMarshal(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("consumer: encode %T: %v", v, err))
	}
	return b
}

// Load rebuilds the group named name from its rows (keys relative to the group, as Dirty
// returns them, all puts and deletes applied). No rows (nil or empty) is a group no command
// created. A row that does not decode, a key other than "meta" and "shard/<n>" with n in
// 0..Shards-1, or shard rows without a meta row give an error wrapping ErrCorruptRow. Load does
// not keep rows; the group's dirty set is empty.
func Load(name string, rows map[string][]byte) (*Group, error) {
	g := New(name)
	if len(rows) == 0 {
		return g, nil
	}
	data, ok := rows[MetaRow]
	if !ok {
		return nil, fmt.Errorf("%w: %d rows without %q", ErrCorruptRow, len(rows), MetaRow)
	}
	var m metaRow
	if err := msgpack.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRow, MetaRow, err)
	}
	if m.Shards <= 0 {
		return nil, fmt.Errorf("%w: %s: shards %d", ErrCorruptRow, MetaRow, m.Shards)
	}
	g.exists = true
	g.clock = normTime(m.Clock)
	g.generation = m.Generation
	g.start = Start{Kind: m.Start.Kind, Time: normTime(m.Start.Time)}
	g.shards = m.Shards
	g.haltThreshold = m.HaltThreshold
	g.halted = m.Halted
	g.lastID = m.LastID
	for _, mr := range m.Members {
		g.members[mr.ID] = normTime(mr.Expires)
	}
	g.parked = make([]ParkedCell, len(m.Parked))
	for i, c := range m.Parked {
		c.ParkedAt = normTime(c.ParkedAt)
		g.parked[i] = c
	}
	sort.Slice(g.parked, func(i, j int) bool { return g.parked[i].ID < g.parked[j].ID })
	g.leases = make([]lease, m.Shards)
	for s := range g.leases {
		g.leases[s] = freeLease
	}
	for key, data := range rows {
		if key == MetaRow {
			continue
		}
		num, ok := strings.CutPrefix(key, ShardRowPrefix)
		s, err := strconv.Atoi(num)
		if !ok || err != nil || s < 0 || s >= m.Shards || strconv.Itoa(s) != num {
			return nil, fmt.Errorf("%w: unknown key %q (shards %d)", ErrCorruptRow, key, m.Shards)
		}
		var lr leaseRow
		if err := msgpack.Unmarshal(data, &lr); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrCorruptRow, key, err)
		}
		g.leases[s] = lease{owner: lr.Owner, epoch: lr.Epoch, offset: lr.Offset}
	}
	return g, nil
}
