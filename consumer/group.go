package consumer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// DefaultSessionTimeout is a member's session when its heartbeat sends SessionTimeout 0.
const DefaultSessionTimeout = 3 * time.Second

var (
	// ErrBadCommand: Apply refused a malformed command (unknown Op, empty Worker, Shards <= 0 in a
	// heartbeat or < 0 in any command, a negative SessionTimeout or HaltThreshold, an unknown
	// Start kind, a missing Park, a Park whose ID names a parked cell of another shard, or a
	// shard outside 0..Shards-1 in Released, Commits or Park). The group did not change. It is
	// wrapped with a message naming the field; the API answers it with 400.
	ErrBadCommand = errors.New("consumer: bad command")
	// ErrCorruptRow: Load found a row it cannot decode, a key it does not know, or shard rows
	// without a meta row. It is wrapped with the row's key.
	ErrCorruptRow = errors.New("consumer: corrupt row")
)

// lease is one shard's stored lease: see Lease.
type lease struct {
	owner  string
	epoch  uint64
	offset int64
}

// freeLease is the lease of a shard nothing happened to yet.
var freeLease = lease{offset: -1}

// Group is the coordinator state of one consumer group. The zero value is not usable: use New
// or Load. A Group is not safe for concurrent use (see the package doc).
type Group struct {
	name          string
	exists        bool
	clock         time.Time // the highest now seen, UTC
	generation    uint64
	start         Start
	shards        int
	haltThreshold int
	halted        bool
	lastID        uint64               // the last parked-cell ID assigned (0: none)
	members       map[string]time.Time // live member ID -> session expiry (UTC)
	leases        []lease              // per shard 0..shards-1
	parked        []ParkedCell         // sorted by ID

	metaDirty   bool
	shardDirty  map[int]struct{} // lease rows to put
	shardDelete map[int]struct{} // lease rows to delete (shards removed by a smaller Shards)
}

// New returns the state of a group named name that no command created yet (Exists false).
func New(name string) *Group {
	return &Group{
		name:        name,
		members:     map[string]time.Time{},
		shardDirty:  map[int]struct{}{},
		shardDelete: map[int]struct{}{},
	}
}

// Name returns the group's name.
func (g *Group) Name() string { return g.name }

// Exists reports whether a command created the group (a heartbeat). It is false for New and
// for Load of no rows.
func (g *Group) Exists() bool { return g.exists }

// Clone returns a deep copy of g, including its dirty set: changing one never changes the
// other.
func (g *Group) Clone() *Group {
	c := *g
	c.members = make(map[string]time.Time, len(g.members))
	for id, exp := range g.members {
		c.members[id] = exp
	}
	c.leases = append([]lease(nil), g.leases...)
	c.parked = append([]ParkedCell(nil), g.parked...)
	c.shardDirty = make(map[int]struct{}, len(g.shardDirty))
	for s := range g.shardDirty {
		c.shardDirty[s] = struct{}{}
	}
	c.shardDelete = make(map[int]struct{}, len(g.shardDelete))
	for s := range g.shardDelete {
		c.shardDelete[s] = struct{}{}
	}
	return &c
}

// Apply applies cmd at the leader's time now and returns the answer to the worker or operator.
//
// A malformed command returns an error wrapping ErrBadCommand and changes nothing. Otherwise the
// group's clock becomes max(now, clock), members whose session ended at that time are removed
// (their shards become free), and the command is applied (see each Op). On a group that does
// not exist only OpHeartbeat creates it; other commands change nothing: commits, parks and
// resolves are fenced, retries and drops affect 0 cells, a leave is a no-op.
//
// Every Result has Generation, Members (live, sorted by ID, Shards = shards owned), Halted and
// Parked. A heartbeat's Result also has Assigned (the leases the worker owns and keeps, sorted
// by shard, with their offsets; -1 when never committed), Revoke (shards the worker owns but
// must release, ascending: they are not in Assigned), SessionExpires and Retry (parked cells
// marked for retry on shards the worker owns, sorted by ID).
//
// A commit is accepted (Accepted[i] true) iff the worker is a live member owning the shard at
// the commit's Epoch; the shard's offset becomes max(offset, commit's Offset), so an accepted
// commit of an older offset changes nothing. In a heartbeat, Commits are applied before
// Released, so a worker can commit a revoked shard's last offset and release it in one call.
//
// OpPark is fenced by Park.Shard's lease at cmd.Epoch (Fenced, nothing stored). A Park.ID that
// names a parked cell updates it in place (Error, Attempts, Worker, ParkedAt = now, Retry
// false); a Park.ID that names no parked cell (resolved or dropped since) stores nothing and
// Affected is 0; a Park.ID of 0 gives the cell the next ID of the group (1, 2, ...; never
// reused). Affected is the ID; a HaltThreshold > 0 replaces the group's. OpResolve deletes the named cells whose
// shard the worker owns at cmd.Epoch (Affected: how many) and sets Fenced if it refused one.
// OpRetry marks the named cells (or All) for retry; Affected counts those not marked before.
// OpDrop deletes them; Affected counts them. After every command Halted is recomputed: the
// group's HaltThreshold is > 0 and at most the number of parked cells not marked for retry.
func (g *Group) Apply(now time.Time, cmd Command) (Result, error) {
	if err := g.validate(cmd); err != nil {
		return Result{}, err
	}
	if !g.exists && cmd.Op != OpHeartbeat {
		return g.applyMissing(cmd), nil
	}
	now = g.advance(now)
	g.expire(now)
	var res Result
	switch cmd.Op {
	case OpHeartbeat:
		res = g.heartbeat(now, cmd)
	case OpCommit:
		res.Accepted = g.commit(cmd.Worker, cmd.Commits)
	case OpLeave:
		res.Accepted = g.commit(cmd.Worker, cmd.Commits)
		if _, ok := g.members[cmd.Worker]; ok {
			g.removeMember(cmd.Worker)
		}
	case OpPark:
		res = g.park(now, cmd)
	case OpResolve:
		res = g.resolve(cmd)
	case OpRetry:
		res.Affected = g.retry(cmd)
	case OpDrop:
		res.Affected = g.drop(cmd)
	}
	g.updateHalted()
	g.fill(&res)
	return res, nil
}

// validate checks cmd without changing g; errors wrap ErrBadCommand.
func (g *Group) validate(cmd Command) error {
	needWorker := true
	switch cmd.Op {
	case OpHeartbeat, OpCommit, OpLeave, OpPark, OpResolve:
	case OpRetry, OpDrop:
		needWorker = false
	default:
		return fmt.Errorf("%w: unknown op %q", ErrBadCommand, cmd.Op)
	}
	if needWorker && cmd.Worker == "" {
		return fmt.Errorf("%w: worker is empty", ErrBadCommand)
	}
	if cmd.Shards < 0 || (cmd.Op == OpHeartbeat && cmd.Shards == 0) {
		return fmt.Errorf("%w: shards must be > 0, got %d", ErrBadCommand, cmd.Shards)
	}
	if cmd.SessionTimeout < 0 {
		return fmt.Errorf("%w: session_timeout must be >= 0, got %v", ErrBadCommand, cmd.SessionTimeout)
	}
	if cmd.HaltThreshold < 0 {
		return fmt.Errorf("%w: halt_threshold must be >= 0, got %d", ErrBadCommand, cmd.HaltThreshold)
	}
	n := g.shardBound(cmd)
	inRange := func(field string, s int) error {
		if s < 0 || s >= n {
			return fmt.Errorf("%w: %s: shard %d outside 0..%d", ErrBadCommand, field, s, n-1)
		}
		return nil
	}
	switch cmd.Op {
	case OpHeartbeat:
		switch cmd.Start.Kind {
		case "", StartEarliest, StartLatest, StartTimestamp:
		default:
			return fmt.Errorf("%w: start.kind %q is not earliest, latest or timestamp", ErrBadCommand, cmd.Start.Kind)
		}
		for i, s := range cmd.Released {
			if err := inRange(fmt.Sprintf("released[%d]", i), s); err != nil {
				return err
			}
		}
	case OpPark:
		if cmd.Park == nil {
			return fmt.Errorf("%w: park is missing", ErrBadCommand)
		}
		if err := inRange("park.shard", cmd.Park.Shard); err != nil {
			return err
		}
		if i, ok := g.findParked(cmd.Park.ID); ok && cmd.Park.ID != 0 && g.parked[i].Shard != cmd.Park.Shard {
			return fmt.Errorf("%w: park.shard %d differs from shard %d of parked cell %d",
				ErrBadCommand, cmd.Park.Shard, g.parked[i].Shard, cmd.Park.ID)
		}
	}
	switch cmd.Op {
	case OpHeartbeat, OpCommit, OpLeave:
		for i, c := range cmd.Commits {
			if err := inRange(fmt.Sprintf("commits[%d].shard", i), c.Shard); err != nil {
				return err
			}
		}
	}
	return nil
}

// shardBound is the shard count a command's shard numbers are checked against: the heartbeat's
// own Shards (it becomes the group's), the group's, or for a group that does not exist the
// command's Shards if set (else only negative shards are refused).
func (g *Group) shardBound(cmd Command) int {
	switch {
	case cmd.Op == OpHeartbeat:
		return cmd.Shards
	case g.exists:
		return g.shards
	case cmd.Shards > 0:
		return cmd.Shards
	default:
		return math.MaxInt
	}
}

// applyMissing answers a command other than a heartbeat on a group that does not exist.
func (g *Group) applyMissing(cmd Command) Result {
	res := Result{Members: []Member{}}
	switch cmd.Op {
	case OpCommit, OpLeave:
		if len(cmd.Commits) > 0 {
			res.Accepted = make([]bool, len(cmd.Commits))
		}
	case OpPark, OpResolve:
		res.Fenced = true
	}
	return res
}

// advance moves the clock to now if now is later, and returns the clock.
func (g *Group) advance(now time.Time) time.Time {
	now = normTime(now)
	if now.After(g.clock) {
		g.clock = now
		g.metaDirty = true
	}
	return g.clock
}

// normTime drops t's monotonic reading and location, so stored and loaded times compare equal.
func normTime(t time.Time) time.Time { return t.Round(0).UTC() }

// expire removes the members whose session ended at now.
func (g *Group) expire(now time.Time) {
	for _, id := range g.memberIDs() {
		if !g.members[id].After(now) {
			g.removeMember(id)
		}
	}
}

// removeMember removes a member and frees its shards (epochs kept).
func (g *Group) removeMember(id string) {
	delete(g.members, id)
	g.generation++
	g.metaDirty = true
	for s := range g.leases {
		if g.leases[s].owner == id {
			g.leases[s].owner = ""
			g.markShard(s)
		}
	}
}

// memberIDs returns the live members' IDs, sorted.
func (g *Group) memberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// markShard records that shard s's lease row must be written.
func (g *Group) markShard(s int) {
	g.shardDirty[s] = struct{}{}
	delete(g.shardDelete, s)
}

// heartbeat applies an OpHeartbeat: see Apply and OpHeartbeat.
func (g *Group) heartbeat(now time.Time, cmd Command) Result {
	w := cmd.Worker
	if !g.exists {
		g.exists = true
		g.start = Start{Kind: cmd.Start.Kind, Time: normTime(cmd.Start.Time)}
		g.metaDirty = true
	}
	if g.haltThreshold != cmd.HaltThreshold {
		g.haltThreshold = cmd.HaltThreshold
		g.metaDirty = true
	}
	g.resize(cmd.Shards)

	timeout := cmd.SessionTimeout
	if timeout == 0 {
		timeout = DefaultSessionTimeout
	}
	expires := now.Add(timeout)
	if _, ok := g.members[w]; !ok {
		g.generation++
	}
	g.members[w] = expires
	g.metaDirty = true

	var res Result
	res.SessionExpires = expires
	res.Accepted = g.commit(w, cmd.Commits)
	for _, s := range cmd.Released {
		if g.leases[s].owner == w {
			g.leases[s].owner = ""
			g.markShard(s)
		}
	}

	target := g.assign()
	for s, t := range target {
		if t == w && g.leases[s].owner == "" {
			g.leases[s].owner = w
			g.leases[s].epoch++
			g.markShard(s)
		}
	}
	for s, l := range g.leases {
		if l.owner != w {
			continue
		}
		if target[s] == w {
			res.Assigned = append(res.Assigned, Lease{Shard: s, Owner: w, Epoch: l.epoch, Offset: l.offset})
		} else {
			res.Revoke = append(res.Revoke, s)
		}
	}
	for _, c := range g.parked {
		if c.Retry && c.Shard < len(g.leases) && g.leases[c.Shard].owner == w {
			res.Retry = append(res.Retry, c)
		}
	}
	return res
}

// resize sets the shard count to n: new shards start free with no offset; the leases of
// removed shards are dropped (their owners lose them at once) and their rows deleted.
func (g *Group) resize(n int) {
	if n == g.shards {
		return
	}
	g.shards = n
	g.metaDirty = true
	for s := n; s < len(g.leases); s++ {
		delete(g.shardDirty, s)
		if g.leases[s].epoch > 0 { // a lease with epoch 0 was never granted, so never written
			g.shardDelete[s] = struct{}{}
		}
	}
	if n < len(g.leases) {
		g.leases = g.leases[:n:n]
	}
	for len(g.leases) < n {
		g.leases = append(g.leases, freeLease)
	}
}

// assign returns the target owner of every shard 0..shards-1 ("" when the group has no
// members): balanced quotas over the members sorted by ID, current owners keeping their shards
// (ascending) up to their quota, every other shard to the member with the largest deficit, ties
// to the lowest index.
func (g *Group) assign() []string {
	n := len(g.leases)
	target := make([]string, n)
	ids := g.memberIDs()
	m := len(ids)
	if m == 0 {
		return target
	}
	index := make(map[string]int, m)
	quota := make([]int, m)
	for i, id := range ids {
		index[id] = i
		quota[i] = n / m
		if i < n%m {
			quota[i]++
		}
	}
	count := make([]int, m)
	for s, l := range g.leases {
		if i, ok := index[l.owner]; ok && count[i] < quota[i] {
			target[s] = l.owner
			count[i]++
		}
	}
	for s := range target {
		if target[s] != "" {
			continue
		}
		best := 0
		for i := 1; i < m; i++ {
			if quota[i]-count[i] > quota[best]-count[best] {
				best = i
			}
		}
		target[s] = ids[best]
		count[best]++
	}
	return target
}

// commit applies commits for worker w, fenced by each shard's owner and epoch, and returns
// whether each was accepted (nil for no commits).
func (g *Group) commit(w string, commits []Offset) []bool {
	if len(commits) == 0 {
		return nil
	}
	_, live := g.members[w]
	accepted := make([]bool, len(commits))
	for i, c := range commits {
		l := &g.leases[c.Shard]
		if !live || l.owner != w || l.epoch != c.Epoch {
			continue
		}
		accepted[i] = true
		if c.Offset > l.offset {
			l.offset = c.Offset
			g.markShard(c.Shard)
		}
	}
	return accepted
}

// holds reports whether worker w owns shard s at epoch. Parked cells of shards removed by a
// smaller shard count are held by no one.
func (g *Group) holds(w string, s int, epoch uint64) bool {
	if s < 0 || s >= len(g.leases) {
		return false
	}
	l := g.leases[s]
	return l.owner == w && l.epoch == epoch
}

// findParked returns the index of parked cell id in g.parked.
func (g *Group) findParked(id uint64) (int, bool) {
	i := sort.Search(len(g.parked), func(i int) bool { return g.parked[i].ID >= id })
	return i, i < len(g.parked) && g.parked[i].ID == id
}

// park applies an OpPark: see OpPark and ParkedCell.
func (g *Group) park(now time.Time, cmd Command) Result {
	p := cmd.Park
	if !g.holds(cmd.Worker, p.Shard, cmd.Epoch) {
		return Result{Fenced: true}
	}
	g.metaDirty = true
	if cmd.HaltThreshold > 0 {
		g.haltThreshold = cmd.HaltThreshold
	}
	if p.ID != 0 {
		i, ok := g.findParked(p.ID)
		if !ok {
			return Result{} // resolved or dropped meanwhile: a redelivery must not bring it back
		}
		c := &g.parked[i]
		c.Error = p.Error
		c.Attempts = p.Attempts
		c.ParkedAt = now
		c.Worker = cmd.Worker
		c.Retry = false
		return Result{Affected: c.ID}
	}
	g.lastID++
	c := *p
	c.ID = g.lastID
	c.ParkedAt = now
	c.Worker = cmd.Worker
	c.Retry = false
	g.parked = append(g.parked, c) // IDs only grow, so g.parked stays sorted
	return Result{Affected: c.ID}
}

// idSet returns the set of cmd.IDs.
func idSet(ids []uint64) map[uint64]bool {
	set := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// resolve applies an OpResolve: it deletes the named cells whose shard the worker owns at
// cmd.Epoch. Fenced is set if a named cell exists whose shard it does not own at that epoch.
func (g *Group) resolve(cmd Command) Result {
	var res Result
	set := idSet(cmd.IDs)
	kept := make([]ParkedCell, 0, len(g.parked))
	for _, c := range g.parked {
		switch {
		case !set[c.ID]:
			kept = append(kept, c)
		case g.holds(cmd.Worker, c.Shard, cmd.Epoch):
			res.Affected++
		default:
			res.Fenced = true
			kept = append(kept, c)
		}
	}
	if res.Affected > 0 {
		g.parked = kept
		g.metaDirty = true
	}
	return res
}

// retry applies an OpRetry and returns the number of cells newly marked for retry.
func (g *Group) retry(cmd Command) uint64 {
	set := idSet(cmd.IDs)
	var n uint64
	for i := range g.parked {
		c := &g.parked[i]
		if (cmd.All || set[c.ID]) && !c.Retry {
			c.Retry = true
			n++
		}
	}
	if n > 0 {
		g.metaDirty = true
	}
	return n
}

// drop applies an OpDrop and returns the number of cells deleted.
func (g *Group) drop(cmd Command) uint64 {
	set := idSet(cmd.IDs)
	kept := make([]ParkedCell, 0, len(g.parked))
	for _, c := range g.parked {
		if !cmd.All && !set[c.ID] {
			kept = append(kept, c)
		}
	}
	n := uint64(len(g.parked) - len(kept))
	if n > 0 {
		g.parked = kept
		g.metaDirty = true
	}
	return n
}

// parkedCount returns the number of parked cells not marked for retry.
func (g *Group) parkedCount() int {
	n := 0
	for _, c := range g.parked {
		if !c.Retry {
			n++
		}
	}
	return n
}

// updateHalted sets halted: a threshold is set and reached by the cells not marked for retry.
func (g *Group) updateHalted() {
	h := g.haltThreshold > 0 && g.parkedCount() >= g.haltThreshold
	if h != g.halted {
		g.halted = h
		g.metaDirty = true
	}
}

// liveMembers returns the live members at now, sorted by ID, each with the number of shards it
// owns.
func (g *Group) liveMembers(now time.Time) []Member {
	owned := map[string]int{}
	for _, l := range g.leases {
		if l.owner != "" {
			owned[l.owner]++
		}
	}
	ms := make([]Member, 0, len(g.members))
	for _, id := range g.memberIDs() {
		if exp := g.members[id]; exp.After(now) {
			ms = append(ms, Member{ID: id, Expires: exp, Shards: owned[id]})
		}
	}
	return ms
}

// fill sets the fields every Result has.
func (g *Group) fill(res *Result) {
	res.Generation = g.generation
	res.Members = g.liveMembers(g.clock)
	res.Halted = g.halted
	res.Parked = g.parkedCount()
}

// Status returns the group as operators see it at now (or at the group's clock if later):
// members whose session ended by then are left out and their shards shown free, and
// Generation counts their removal. Leases lists, by shard, every shard 0..Shards-1 that has a
// live owner or a committed offset; Parked lists every parked cell by ID. Status does not change
// g; the slices are the caller's.
func (g *Group) Status(now time.Time) Status {
	now = normTime(now)
	if g.clock.After(now) {
		now = g.clock
	}
	st := Status{
		Group:         g.name,
		Generation:    g.generation,
		Start:         g.start,
		HaltThreshold: g.haltThreshold,
		Halted:        g.halted,
		Members:       g.liveMembers(now),
		Leases:        []Lease{},
		Parked:        append([]ParkedCell{}, g.parked...),
	}
	live := make(map[string]bool, len(st.Members))
	for _, m := range st.Members {
		live[m.ID] = true
	}
	st.Generation += uint64(len(g.members) - len(st.Members))
	for s, l := range g.leases {
		owner := l.owner
		if !live[owner] {
			owner = ""
		}
		if owner != "" || l.offset >= 0 {
			st.Leases = append(st.Leases, Lease{Shard: s, Owner: owner, Epoch: l.epoch, Offset: l.offset})
		}
	}
	return st
}
