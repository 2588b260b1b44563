package catalog

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// Mode is how a datastore's partitions are replicated.
type Mode string

// The modes of a datastore.
const (
	// ModeRaft: a partition is a raft group on Partition.Replicas.
	ModeRaft Mode = "raft"
	// ModeAsync: a partition is a MySQL storage cluster, Partition.Cluster.
	ModeAsync Mode = "async"
)

// Limits of the catalog.
const (
	// MaxPartitions bounds the partitions of one datastore (one per shard at most).
	MaxPartitions = cells.MaxShards
	// MaxReplicas bounds the replicas of one partition.
	MaxReplicas = 9
	// MaxHistory bounds the events a datastore keeps (Datastore.History): the oldest go first.
	MaxHistory = 256
	// maxImportedID bounds the partition IDs an import keeps.
	maxImportedID = 1 << 20
	// maxNodeIDLen bounds a replica's node id.
	maxNodeIDLen = 64
	// MaxSettingsBytes bounds a datastore's Settings as OpSettings sets them.
	MaxSettingsBytes = 64 << 10
)

// Partition is one partition of a datastore: a contiguous range of its shards, served by a raft
// group on Replicas (raft mode, node ids) or by the storage cluster Cluster (async mode).
//
// ID is unique within the datastore and never reused, also after a merge or a drop. Generation
// is the catalog generation at which the partition took its current range (its creation, the
// split that made it or shrank it, the merge that grew it): a request routed with an older view
// of the partition names an older generation and is refused by the replica (ErrStale), which
// re-routes it. Parent is the partition it was split from, -1 for one created with its datastore.
// Learners are the partition's permanent non-voting replicas (raft), node ids in order, as
// recorded by OpAddLearner and OpRemoveLearner (learners.go); a split's right half starts with
// its parent's.
// Origin is the range the partition was created with (its datastore's creation, the split that
// made it): its raft log starts from a store of that range, so a replica that replays the log
// from its start opens its store with it, and takes the range its log's splits and merges
// give it. It starts where Shards starts; a split may end Shards below it, a merge above.
type Partition struct {
	ID         int
	Shards     cells.ShardRange
	Origin     cells.ShardRange
	Replicas   []string
	Learners   []string
	Cluster    string
	Generation uint64
	Parent     int
}

// Event is one change of a datastore's partitioning, as the console and the split policy show
// it: Op is OpSplit or OpMerge, Generation the catalog generation it made, At its time (the
// command's Now), Left and Right the two partitions (the parent and the new right half of a
// split; the merged pair, Left surviving, of a merge) and AtShard the first shard of the right
// half. Auto is set when the cluster's policy made the change (a load- or size-based split, an
// automatic merge) rather than an operator.
type Event struct {
	Op         Op
	Generation uint64
	At         time.Time
	Left       int
	Right      int
	AtShard    int
	Auto       bool
}

// Datastore is one datastore of the catalog. Partitions are ordered by shard and cover
// [0, Shards-1] without gap or overlap. NextID is the ID the next new partition gets. Settings
// is opaque to the catalog (the async mode's storage clusters, the split thresholds: their
// owners encode them). History holds the latest splits and merges, oldest first, at most
// MaxHistory. Created is the catalog generation of the command that created it, 0 for a
// datastore imported from a topology file (OpImport): a datastore dropped and created again
// under its name has another Created, which tells the nodes that it is a new datastore whose
// raft groups must not meet the old one's.
type Datastore struct {
	Name       string
	Mode       Mode
	Shards     int
	Partitions []Partition
	NextID     int
	Created    uint64
	CreatedAt  time.Time
	Settings   []byte
	History    []Event
}

// PartitionOf returns the partition holding shard, or nil when shard is outside the datastore.
// It searches the ordered partitions: O(log partitions).
func (d *Datastore) PartitionOf(shard int) *Partition {
	if shard < 0 || shard >= d.Shards {
		return nil
	}
	i := sort.Search(len(d.Partitions), func(i int) bool { return d.Partitions[i].Shards.Last >= shard })
	if i == len(d.Partitions) {
		return nil
	}
	return &d.Partitions[i]
}

// Partition returns the partition whose ID is id, or nil.
func (d *Datastore) Partition(id int) *Partition {
	for i := range d.Partitions {
		if d.Partitions[i].ID == id {
			return &d.Partitions[i]
		}
	}
	return nil
}

// Catalog is the replicated catalog of a cluster: its datastores and their partitions, at a
// generation that every accepted change raises by one. It is a pure, deterministic state
// machine replicated by raft elsewhere: it changes only through Apply, reads no clock (times
// come from Command.Now) and never lets map order reach a result or an encoding, so replicas
// applying the same commands hold the same bytes (Encode).
//
// Datastores maps a name to its datastore; callers must not modify it (use Apply). The zero
// Catalog is empty. A Catalog is not safe for concurrent use: apply commands to a Clone and
// swap it in when readers run concurrently.
type Catalog struct {
	Generation uint64
	Datastores map[string]*Datastore
	// Voters are the node ids of the catalog's own raft group's voters, once an operator moved
	// them (OpSetVoters); empty: the topology file's first nodes, as the cluster started.
	Voters []string
	// Peers maps the name of each peer cluster this one replicates to onto its settings
	// (OpSetPeer; opaque here, encoded by package peering). Nil when there are none.
	Peers map[string][]byte
}

// Op is the operation of a Command.
type Op string

// The catalog operations. See Catalog.Apply for their rules.
const (
	// OpCreate creates a datastore (Command.Create).
	OpCreate Op = "create"
	// OpImport creates the datastores of a topology file (Command.Import) in an empty catalog,
	// keeping their partition IDs: the first command of a cluster that started from a topology.
	OpImport Op = "import"
	// OpDrop drops a datastore: Command.Datastore, named again in Command.Confirm.
	OpDrop Op = "drop"
	// OpSplit splits Command.Partition of Command.Datastore at Command.AtShard.
	OpSplit Op = "split"
	// OpMerge merges Command.Partition (the left) with Command.Right, its right neighbour.
	OpMerge Op = "merge"
	// OpSetReplicas sets the replicas of a raft partition (Command.Replicas), as membership
	// changes leave them.
	OpSetReplicas Op = "set-replicas"
	// OpSetVoters records the catalog group's voters (Command.Voters), as a move of the
	// catalog's votes leaves them (voters.go).
	OpSetVoters Op = "set-voters"
	// OpSettings replaces the settings of Command.Datastore with Command.Settings (its split
	// thresholds, its leader zone: what its owners encode there).
	OpSettings Op = "settings"
	// OpAddLearner records node Command.Learner as a learner of Command.Partition of
	// Command.Datastore (Partition.Learners); OpRemoveLearner forgets it.
	OpAddLearner    Op = "add-learner"
	OpRemoveLearner Op = "remove-learner"
)

// Spec describes a datastore to create: its name, mode and shard count (fixed forever), and
// its partitions, either listed (Partitions, ordered and covering the shards; their IDs and
// generations are assigned) or as a count of equal contiguous ranges (PartitionCount, default 1)
// on Replicas (raft) or on Clusters, partition i on Clusters[i % len] (async). Settings is kept
// as given.
type Spec struct {
	Name           string
	Mode           Mode
	Shards         int
	PartitionCount int
	Replicas       []string
	Clusters       []string
	Partitions     []Partition
	Settings       []byte
}

// Command is one change to the catalog. Now is its time, chosen by the proposer (the raft
// leader of the catalog). ExpectGeneration, when not 0, is the catalog generation the command
// was decided at: a split, merge or replica change of a partition that changed after it (whose
// Generation is higher; for a merge, either partition) is refused with ErrStale, so that an
// operator's or a policy's decision taken on an older view never applies to a partition that
// has changed since.
type Command struct {
	Op               Op
	Create           Spec
	Import           []Spec
	Datastore        string
	Confirm          string
	Partition        int
	Right            int
	AtShard          int
	Replicas         []string
	ExpectGeneration uint64
	Now              time.Time
	// Auto marks a split or merge made by the cluster's policy, not an operator
	// (Event.Auto): only partitions of automatic splits are merged automatically.
	Auto bool
	// Cluster, for OpSplit of an async partition, names the storage cluster of the right half
	// (the one holding the parent's data now, which its placement records may have moved off
	// the catalog's); "" keeps the parent's. For OpMerge of async partitions, it names the
	// cluster both are on now (their placement records'), which the merged one gets, and the
	// catalog's clusters need not match. A raft partition refuses it.
	Cluster string `msgpack:",omitempty"`
	// Voters, for OpSetVoters, are the catalog group's voters.
	Voters []string `msgpack:",omitempty"`
	// Settings, for OpSettings, are the datastore's new settings (Datastore.Settings); for
	// OpSetPeer, the peer's (empty: remove it).
	Settings []byte `msgpack:",omitempty"`
	// Peer, for OpSetPeer, names the peer cluster.
	Peer string `msgpack:",omitempty"`
	// Learner, for OpAddLearner and OpRemoveLearner, is the learner's node id.
	Learner string `msgpack:",omitempty"`
}

// Result is the outcome of an accepted command: the catalog generation it made, and the
// partitions it created or changed (OpCreate: all of them; OpSplit: the left then the right
// half; OpMerge: the merged partition; OpSetReplicas, OpAddLearner, OpRemoveLearner: the
// partition; OpDrop: none).
type Result struct {
	Generation uint64
	Partitions []Partition
}

// Errors of Apply, each wrapped with a message naming the datastore, the partition and the
// reason. A refused command changes nothing.
var (
	// ErrBadCommand: the command is malformed or not allowed (an unknown op, an invalid name,
	// shard count or range, a split point outside the partition, a merge of partitions that
	// are not neighbours or whose replicas differ, a drop not confirmed).
	ErrBadCommand = errors.New("catalog: bad command")
	// ErrNotFound: no such datastore or partition.
	ErrNotFound = errors.New("catalog: not found")
	// ErrExists: OpCreate of a datastore that exists.
	ErrExists = errors.New("catalog: datastore exists")
	// ErrStale: Command.ExpectGeneration does not match the partition's generation.
	ErrStale = errors.New("catalog: stale generation")
	// ErrCorrupt: Decode found bytes that are not a catalog, or a catalog that breaks an
	// invariant (Check).
	ErrCorrupt = errors.New("catalog: corrupt catalog")
)

// New returns an empty catalog.
func New() *Catalog { return &Catalog{Datastores: map[string]*Datastore{}} }

// Clone returns a deep copy of c: changing one never changes the other.
func (c *Catalog) Clone() *Catalog {
	out := &Catalog{Generation: c.Generation, Datastores: make(map[string]*Datastore, len(c.Datastores)), Voters: slices.Clone(c.Voters), Peers: clonePeers(c.Peers)}
	for name, d := range c.Datastores {
		out.Datastores[name] = d.clone()
	}
	return out
}

func (d *Datastore) clone() *Datastore {
	c := *d
	c.Partitions = make([]Partition, len(d.Partitions))
	for i, p := range d.Partitions {
		c.Partitions[i] = p.clone()
	}
	c.Settings = slices.Clone(d.Settings)
	c.History = slices.Clone(d.History)
	return &c
}

func (p Partition) clone() Partition {
	p.Replicas = slices.Clone(p.Replicas)
	p.Learners = slices.Clone(p.Learners)
	return p
}

// Names returns the names of the datastores, sorted.
func (c *Catalog) Names() []string {
	names := make([]string, 0, len(c.Datastores))
	for n := range c.Datastores {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// normTime drops t's monotonic reading and location and keeps microseconds, as encoded.
func normTime(t time.Time) time.Time { return t.Round(0).UTC().Truncate(time.Microsecond) }

// Apply applies cmd and returns its result, or refuses it (see the errors) and changes nothing.
//
//   - OpCreate: the spec must name a new datastore ([a-z][a-z0-9_]{0,31}, else ErrBadCommand;
//     an existing one: ErrExists) with 1 to cells.MaxShards shards, and partitions that cover
//     them (a count of at most one per shard, or a list). Raft partitions need 1 to MaxReplicas
//     distinct replicas, async ones a cluster and no replica. Partition IDs are 0, 1, ...
//   - OpImport: each of cmd.Import is created as by OpCreate, keeping the IDs its partitions
//     list, with Created 0; only into an empty catalog at generation 0 (else ErrExists), and
//     all or none. The catalog's generation becomes 1.
//   - OpDrop: cmd.Confirm must repeat cmd.Datastore.
//   - OpSplit: cmd.AtShard must be inside the partition and above its first shard. The
//     partition keeps its ID and the shards below AtShard; a new partition (the next ID, Parent
//     the split one) takes the rest, on the same replicas or cluster (cmd.Cluster, async only:
//     on that cluster), with the partition's learners. Both get the new generation. A
//     cmd.Right other than 0 must be the next ID (else ErrStale).
//   - OpMerge: cmd.Right must be the partition right after cmd.Partition, on the same set of
//     replicas (raft) or the same cluster (async; or cmd.Cluster, the one both are on now):
//     move replicas first. The left partition takes both ranges and the new generation and
//     keeps its learners; the right one's ID (and its learners' record) is gone for good. The
//     same merge again, once applied (its event still in the history), answers the left
//     partition as it is and changes nothing, not even the generation.
//   - OpSetReplicas: a raft partition's replicas become cmd.Replicas (1 to MaxReplicas distinct
//     node ids), and a recorded learner among them is a learner no more; its range and
//     generation stay, the catalog's generation rises.
//   - OpAddLearner, OpRemoveLearner: cmd.Learner (a node id) joins or leaves the raft
//     partition's learners (at most MaxReplicas).
//   - OpSetVoters: the catalog's Voters become cmd.Voters (1 to MaxVoters distinct node ids);
//     the catalog's generation rises.
//   - OpSettings: cmd.Datastore's Settings become cmd.Settings (at most MaxSettingsBytes); its
//     partitions and their generations stay, the catalog's generation rises.
//
// Every accepted command raises the catalog's generation by one.
func (c *Catalog) Apply(cmd Command) (Result, error) {
	if c.Datastores == nil {
		c.Datastores = map[string]*Datastore{}
	}
	switch cmd.Op {
	case OpCreate:
		return c.create(cmd.Create, cmd.Now, false)
	case OpImport:
		return c.importSpecs(cmd)
	case OpSetVoters:
		return c.setVoters(cmd)
	case OpSetPeer:
		return c.setPeer(cmd)
	case OpDrop, OpSplit, OpMerge, OpSetReplicas, OpSettings, OpAddLearner, OpRemoveLearner:
	default:
		return Result{}, fmt.Errorf("%w: unknown op %q (want create, import, drop, split, merge, set-replicas, set-voters, settings, set-peer, add-learner or remove-learner)", ErrBadCommand, cmd.Op)
	}
	d := c.Datastores[cmd.Datastore]
	if d == nil {
		return Result{}, fmt.Errorf("%w: %s: no datastore %q", ErrNotFound, cmd.Op, cmd.Datastore)
	}
	if cmd.Op == OpSettings {
		if len(cmd.Settings) > MaxSettingsBytes {
			return Result{}, fmt.Errorf("%w: settings of %s: %d bytes, at most %d", ErrBadCommand, d.Name, len(cmd.Settings), MaxSettingsBytes)
		}
		d.Settings = slices.Clone(cmd.Settings)
		c.Generation++
		return Result{Generation: c.Generation}, nil
	}
	if cmd.Op == OpDrop {
		if cmd.Confirm != cmd.Datastore {
			return Result{}, fmt.Errorf("%w: drop %s: confirm must name the datastore again (got %q)", ErrBadCommand, cmd.Datastore, cmd.Confirm)
		}
		delete(c.Datastores, cmd.Datastore)
		c.Generation++
		return Result{Generation: c.Generation}, nil
	}
	p := d.Partition(cmd.Partition)
	if p == nil {
		return Result{}, fmt.Errorf("%w: %s %s: no partition %d", ErrNotFound, cmd.Op, d.Name, cmd.Partition)
	}
	if cmd.Op == OpMerge && d.Partition(cmd.Right) == nil && d.Merged(p.ID, cmd.Right) {
		// Decided before (a merge completed by two nodes at once): the same answer, no change.
		return Result{Generation: c.Generation, Partitions: []Partition{p.clone()}}, nil
	}
	if err := stale(cmd, d, p); err != nil {
		return Result{}, err
	}
	switch cmd.Op {
	case OpSplit:
		return c.split(d, p, cmd)
	case OpMerge:
		return c.merge(d, p, cmd)
	case OpAddLearner, OpRemoveLearner:
		return c.setLearner(d, p, cmd)
	}
	return c.setReplicas(d, p, cmd)
}

// stale returns ErrStale when p changed after the generation cmd was decided at.
func stale(cmd Command, d *Datastore, p *Partition) error {
	if cmd.ExpectGeneration != 0 && p.Generation > cmd.ExpectGeneration {
		return fmt.Errorf("%w: %s %s partition %d: changed at generation %d, after %d", ErrStale, cmd.Op, d.Name, p.ID, p.Generation, cmd.ExpectGeneration)
	}
	return nil
}

// importSpecs applies OpImport: every spec is created as by OpCreate, but keeping the IDs its
// partitions list (distinct, 0 or more) and with Created 0, all at one generation. It is refused
// (ErrExists) unless the catalog is empty and at generation 0, and refused whole when one spec
// is.
func (c *Catalog) importSpecs(cmd Command) (Result, error) {
	if c.Generation != 0 || len(c.Datastores) != 0 {
		return Result{}, fmt.Errorf("%w: import: the catalog is at generation %d, not empty", ErrExists, c.Generation)
	}
	if len(cmd.Import) == 0 {
		return Result{}, fmt.Errorf("%w: import: no datastore", ErrBadCommand)
	}
	next := New()
	var res Result
	for _, s := range cmd.Import {
		next.Generation = 0
		r, err := next.create(s, cmd.Now, true)
		if err != nil {
			return Result{}, fmt.Errorf("import: %w", err)
		}
		res.Partitions = append(res.Partitions, r.Partitions...)
	}
	c.Generation, c.Datastores = 1, next.Datastores
	res.Generation = 1
	return res, nil
}

// create applies OpCreate of s (keepIDs false) or one datastore of OpImport (keepIDs true:
// the partitions' IDs are kept, Created is 0).
func (c *Catalog) create(s Spec, now time.Time, keepIDs bool) (Result, error) {
	bad := func(format string, args ...any) (Result, error) {
		return Result{}, fmt.Errorf("%w: create %s: %s", ErrBadCommand, s.Name, fmt.Sprintf(format, args...))
	}
	if !cells.ValidDatastoreName(s.Name) {
		return bad("name %q must match [a-z][a-z0-9_]{0,%d}", s.Name, cells.MaxDatastoreNameLen-1)
	}
	if c.Datastores[s.Name] != nil {
		return Result{}, fmt.Errorf("%w: create %s", ErrExists, s.Name)
	}
	if s.Mode != ModeRaft && s.Mode != ModeAsync {
		return bad("mode %q: want raft or async", s.Mode)
	}
	if s.Shards < 1 || s.Shards > cells.MaxShards {
		return bad("shards %d: want 1 to %d", s.Shards, cells.MaxShards)
	}
	parts := s.Partitions
	if len(parts) == 0 {
		n := s.PartitionCount
		if n == 0 {
			n = 1
		}
		if n < 1 || n > s.Shards {
			return bad("partitions %d: want 1 to %d (one shard each at most)", n, s.Shards)
		}
		if s.Mode == ModeAsync && len(s.Clusters) == 0 {
			return bad("an async datastore needs storage clusters")
		}
		for i := range n {
			p := Partition{Shards: cells.ShardRange{First: i * s.Shards / n, Last: (i+1)*s.Shards/n - 1}}
			if s.Mode == ModeRaft {
				p.Replicas = slices.Clone(s.Replicas)
			} else {
				p.Cluster = s.Clusters[i%len(s.Clusters)]
			}
			parts = append(parts, p)
		}
	} else {
		parts = slices.Clone(parts)
		for i := range parts {
			parts[i] = parts[i].clone()
		}
	}
	if len(parts) > MaxPartitions {
		return bad("%d partitions: at most %d", len(parts), MaxPartitions)
	}
	next := 0
	ids := map[int]bool{}
	for i := range parts {
		p := &parts[i]
		want := 0
		if i > 0 {
			want = parts[i-1].Shards.Last + 1
		}
		if p.Shards.First != want || p.Shards.Last < p.Shards.First {
			return bad("partition %d covers shards [%d, %d], want a range starting at %d", i, p.Shards.First, p.Shards.Last, want)
		}
		if err := checkPlacement(s.Mode, p.Replicas, p.Cluster); err != nil {
			return bad("partition %d: %v", i, err)
		}
		if !keepIDs {
			p.ID = next
		} else if p.ID < 0 || p.ID >= maxImportedID || ids[p.ID] {
			return bad("partition %d: id %d negative, too large or given twice", i, p.ID)
		}
		ids[p.ID] = true
		p.Parent, p.Generation, p.Origin = -1, c.Generation+1, p.Shards
		next = max(next, p.ID+1)
	}
	if last := parts[len(parts)-1].Shards.Last; last != s.Shards-1 {
		return bad("partitions end at shard %d, want %d", last, s.Shards-1)
	}
	c.Generation++
	d := &Datastore{Name: s.Name, Mode: s.Mode, Shards: s.Shards, Partitions: parts, NextID: next,
		CreatedAt: normTime(now), Settings: slices.Clone(s.Settings)}
	if !keepIDs {
		d.Created = c.Generation
	}
	c.Datastores[s.Name] = d
	return Result{Generation: c.Generation, Partitions: clonePartitions(parts)}, nil
}

// checkPlacement checks a partition's replicas (raft) or cluster (async).
func checkPlacement(mode Mode, replicas []string, cluster string) error {
	if mode == ModeAsync {
		if cluster == "" || len(replicas) > 0 {
			return errors.New("an async partition names a storage cluster and no replica")
		}
		return nil
	}
	if cluster != "" {
		return errors.New("a raft partition names replicas, not a storage cluster")
	}
	if len(replicas) == 0 || len(replicas) > MaxReplicas {
		return fmt.Errorf("%d replicas: want 1 to %d", len(replicas), MaxReplicas)
	}
	seen := make(map[string]bool, len(replicas))
	for _, r := range replicas {
		if r == "" || len(r) > maxNodeIDLen {
			return fmt.Errorf("replica %q: want a node id of 1 to %d bytes", r, maxNodeIDLen)
		}
		if seen[r] {
			return fmt.Errorf("replica %q given twice", r)
		}
		seen[r] = true
	}
	return nil
}

// split applies OpSplit.
func (c *Catalog) split(d *Datastore, p *Partition, cmd Command) (Result, error) {
	if cmd.AtShard <= p.Shards.First || cmd.AtShard > p.Shards.Last {
		return Result{}, fmt.Errorf("%w: split %s partition %d: at shard %d, want %d to %d (each half keeps one shard at least)",
			ErrBadCommand, d.Name, p.ID, cmd.AtShard, p.Shards.First+1, p.Shards.Last)
	}
	if len(d.Partitions) >= MaxPartitions {
		return Result{}, fmt.Errorf("%w: split %s: %d partitions already", ErrBadCommand, d.Name, len(d.Partitions))
	}
	if cmd.Right != 0 && cmd.Right != d.NextID {
		// The right half's state was prepared under another ID (an async split in place).
		return Result{}, fmt.Errorf("%w: split %s partition %d: the right half would be partition %d, not %d", ErrStale, d.Name, p.ID, d.NextID, cmd.Right)
	}
	cluster := p.Cluster
	if cmd.Cluster != "" {
		if d.Mode != ModeAsync {
			return Result{}, fmt.Errorf("%w: split %s partition %d: a storage cluster names an async partition's place, and %s is %s", ErrBadCommand, d.Name, p.ID, d.Name, d.Mode)
		}
		cluster = cmd.Cluster
	}
	c.Generation++
	right := Partition{ID: d.NextID, Shards: cells.ShardRange{First: cmd.AtShard, Last: p.Shards.Last}, Origin: cells.ShardRange{First: cmd.AtShard, Last: p.Shards.Last},
		Replicas: slices.Clone(p.Replicas), Learners: slices.Clone(p.Learners), Cluster: cluster, Generation: c.Generation, Parent: p.ID}
	d.NextID++
	p.Shards.Last, p.Generation = cmd.AtShard-1, c.Generation
	left := p.clone()
	i := slices.IndexFunc(d.Partitions, func(q Partition) bool { return q.ID == left.ID })
	d.Partitions = slices.Insert(d.Partitions, i+1, right)
	d.record(Event{Op: OpSplit, Generation: c.Generation, At: normTime(cmd.Now), Left: left.ID, Right: right.ID, AtShard: cmd.AtShard, Auto: cmd.Auto})
	return Result{Generation: c.Generation, Partitions: []Partition{left, right.clone()}}, nil
}

// merge applies OpMerge.
func (c *Catalog) merge(d *Datastore, p *Partition, cmd Command) (Result, error) {
	r := d.Partition(cmd.Right)
	if r == nil {
		return Result{}, fmt.Errorf("%w: merge %s: no partition %d", ErrNotFound, d.Name, cmd.Right)
	}
	if err := stale(cmd, d, r); err != nil {
		return Result{}, err
	}
	if r.Shards.First != p.Shards.Last+1 {
		return Result{}, fmt.Errorf("%w: merge %s: partition %d (shards %d to %d) is not right after partition %d (shards %d to %d)",
			ErrBadCommand, d.Name, r.ID, r.Shards.First, r.Shards.Last, p.ID, p.Shards.First, p.Shards.Last)
	}
	cluster := p.Cluster
	if cmd.Cluster != "" {
		// An async merge on the cluster both partitions' placement records name now.
		if d.Mode != ModeAsync {
			return Result{}, fmt.Errorf("%w: merge %s: a storage cluster names an async partition's place, and %s is %s", ErrBadCommand, d.Name, d.Name, d.Mode)
		}
		cluster = cmd.Cluster
	} else if p.Cluster != r.Cluster || !sameSet(p.Replicas, r.Replicas) {
		return Result{}, fmt.Errorf("%w: merge %s: partitions %d and %d are not on the same replicas (%v, %v; clusters %q, %q): move replicas first",
			ErrBadCommand, d.Name, p.ID, r.ID, p.Replicas, r.Replicas, p.Cluster, r.Cluster)
	}
	c.Generation++
	rightID := r.ID
	p.Shards.Last, p.Generation, p.Cluster = r.Shards.Last, c.Generation, cluster
	merged := p.clone()
	d.Partitions = slices.DeleteFunc(d.Partitions, func(q Partition) bool { return q.ID == rightID })
	d.record(Event{Op: OpMerge, Generation: c.Generation, At: normTime(cmd.Now), Left: merged.ID, Right: rightID, AtShard: merged.Shards.First, Auto: cmd.Auto})
	return Result{Generation: c.Generation, Partitions: []Partition{merged}}, nil
}

// Merged reports whether the datastore's history holds the merge of partition right into
// partition left.
func (d *Datastore) Merged(left, right int) bool {
	for _, e := range d.History {
		if e.Op == OpMerge && e.Left == left && e.Right == right {
			return true
		}
	}
	return false
}

// setReplicas applies OpSetReplicas.
func (c *Catalog) setReplicas(d *Datastore, p *Partition, cmd Command) (Result, error) {
	if d.Mode != ModeRaft {
		return Result{}, fmt.Errorf("%w: set replicas of %s partition %d: an async datastore's partitions have no replicas", ErrBadCommand, d.Name, p.ID)
	}
	if err := checkPlacement(ModeRaft, cmd.Replicas, ""); err != nil {
		return Result{}, fmt.Errorf("%w: set replicas of %s partition %d: %v", ErrBadCommand, d.Name, p.ID, err)
	}
	c.Generation++
	p.Replicas = slices.Clone(cmd.Replicas)
	p.Learners = slices.DeleteFunc(p.Learners, func(l string) bool { return slices.Contains(p.Replicas, l) })
	if len(p.Learners) == 0 {
		p.Learners = nil
	}
	return Result{Generation: c.Generation, Partitions: []Partition{p.clone()}}, nil
}

// record appends e to d's history, dropping the oldest events past MaxHistory.
func (d *Datastore) record(e Event) {
	d.History = append(d.History, e)
	if n := len(d.History) - MaxHistory; n > 0 {
		d.History = slices.Delete(d.History, 0, n)
	}
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func clonePartitions(ps []Partition) []Partition {
	out := make([]Partition, len(ps))
	for i, p := range ps {
		out[i] = p.clone()
	}
	return out
}

// Check reports the first broken invariant of c (wrapping ErrCorrupt): every datastore's name
// valid and its key in Datastores, its partitions ordered and covering its shards without gap
// or overlap, IDs unique and below NextID, generations at most the catalog's, placements valid.
func (c *Catalog) Check() error {
	if err := checkVoters(c.Voters); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := c.checkPeers(); err != nil {
		return err
	}
	for _, name := range c.Names() {
		d := c.Datastores[name]
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: datastore %s: %s", ErrCorrupt, name, fmt.Sprintf(format, args...))
		}
		if d == nil || d.Name != name || !cells.ValidDatastoreName(name) {
			return bad("name or entry invalid")
		}
		if d.Shards < 1 || d.Shards > cells.MaxShards || len(d.Partitions) == 0 {
			return bad("%d shards in %d partitions", d.Shards, len(d.Partitions))
		}
		ids := map[int]bool{}
		for i, p := range d.Partitions {
			want := 0
			if i > 0 {
				want = d.Partitions[i-1].Shards.Last + 1
			}
			if p.Shards.First != want || p.Shards.Last < p.Shards.First {
				return bad("partition %d covers [%d, %d], want a range from %d", p.ID, p.Shards.First, p.Shards.Last, want)
			}
			if ids[p.ID] || p.ID < 0 || p.ID >= d.NextID {
				return bad("partition id %d repeated or not below %d", p.ID, d.NextID)
			}
			ids[p.ID] = true
			if p.Generation == 0 || p.Generation > c.Generation {
				return bad("partition %d at generation %d, catalog at %d", p.ID, p.Generation, c.Generation)
			}
			if err := checkPlacement(d.Mode, p.Replicas, p.Cluster); err != nil {
				return bad("partition %d: %v", p.ID, err)
			}
			if err := checkLearners(d.Mode, p.Learners); err != nil {
				return bad("partition %d: %v", p.ID, err)
			}
			if p.Origin.First != p.Shards.First || p.Origin.Last < p.Origin.First {
				return bad("partition %d: origin [%d, %d] does not start its range [%d, %d]", p.ID, p.Origin.First, p.Origin.Last, p.Shards.First, p.Shards.Last)
			}
		}
		if last := d.Partitions[len(d.Partitions)-1].Shards.Last; last != d.Shards-1 {
			return bad("partitions end at shard %d, want %d", last, d.Shards-1)
		}
	}
	return nil
}
