package consumer

import (
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Op names a Command's operation.
type Op string

// Operations of a Command.
const (
	// OpHeartbeat joins the group or keeps the worker a member for SessionTimeout; it releases
	// the shards in Released, applies Commits, and answers the worker's leases.
	OpHeartbeat Op = "heartbeat"
	// OpCommit applies Commits (fenced by each shard's lease epoch).
	OpCommit Op = "commit"
	// OpLeave applies Commits, then removes the worker and frees its shards at once.
	OpLeave Op = "leave"
	// OpPark parks Park (fenced by Epoch), keeping it with its error.
	OpPark Op = "park"
	// OpResolve removes the parked cells IDs after a successful redelivery (fenced by Epoch
	// of each cell's shard).
	OpResolve Op = "resolve"
	// OpRetry marks parked cells IDs (or All) for redelivery by their shard's owner.
	OpRetry Op = "retry"
	// OpDrop deletes parked cells IDs (or All) without delivering them.
	OpDrop Op = "drop"
)

// StartKind says where a shard with no committed offset starts.
type StartKind string

// Start kinds.
const (
	// StartEarliest: from the first cell of the shard.
	StartEarliest StartKind = "earliest"
	// StartLatest: after the last cell stored when the shard is first assigned.
	StartLatest StartKind = "latest"
	// StartTimestamp: from the first cell created at or after Start.Time.
	StartTimestamp StartKind = "timestamp"
)

// Start is a group's start position. The zero value means StartEarliest.
type Start struct {
	Kind StartKind `json:"kind" msgpack:"k"`
	Time time.Time `json:"time,omitzero" msgpack:"t"`
}

// Offset is a committed position in one shard's log: the added_id of the last cell the group
// has handled. Epoch is the committer's lease epoch of the shard.
type Offset struct {
	Shard  int    `json:"shard" msgpack:"s"`
	Epoch  uint64 `json:"epoch" msgpack:"e"`
	Offset int64  `json:"offset" msgpack:"o"`
}

// Lease is a shard's ownership: Owner ("" when free), the Epoch of the current (or last) grant,
// and the committed Offset (-1 when the group never committed one for the shard; the owner
// then resolves the group's Start and commits it).
type Lease struct {
	Shard  int    `json:"shard" msgpack:"s"`
	Owner  string `json:"owner,omitempty" msgpack:"w"`
	Epoch  uint64 `json:"epoch" msgpack:"e"`
	Offset int64  `json:"offset" msgpack:"o"`
}

// Member is a live worker of a group: its session ends at Expires (the coordinator's clock)
// unless renewed by a heartbeat. Shards counts the shards it owns.
type Member struct {
	ID      string    `json:"id" msgpack:"i"`
	Expires time.Time `json:"expires" msgpack:"x"`
	Shards  int       `json:"shards" msgpack:"n"`
}

// ParkedCell is a cell whose delivery failed Attempts times, kept with its last Error. ID is
// assigned by the coordinator (a Park command with ID 0 parks a new cell). Retry is set by
// OpRetry: the shard's owner redelivers it, then resolves it (OpResolve) or parks it again
// (OpPark with the same ID, which stores nothing if the cell was resolved or dropped since).
type ParkedCell struct {
	ID        uint64    `json:"id" msgpack:"i"`
	Shard     int       `json:"shard" msgpack:"s"`
	AddedID   int64     `json:"added_id" msgpack:"a"`
	RowKey    uuid.UUID `json:"row_key" msgpack:"r"`
	ColumnKey string    `json:"column_key" msgpack:"c"`
	RefKey    int64     `json:"ref_key" msgpack:"f"`
	Error     string    `json:"error" msgpack:"e"`
	Attempts  int       `json:"attempts" msgpack:"n"`
	Worker    string    `json:"worker" msgpack:"w"`
	ParkedAt  time.Time `json:"parked_at" msgpack:"t"`
	Retry     bool      `json:"retry" msgpack:"y"`
}

// Command is one operation on a group's coordinator state, carried in a raft log entry of the
// group's coordinator partition. Which fields are read depends on Op (see each Op).
type Command struct {
	Op     Op     `json:"op" msgpack:"op"`
	Worker string `json:"worker,omitempty" msgpack:"w"`
	// Shards is the datastore's shard count, set by the node (not the client): shards
	// 0..Shards-1 are split among the members.
	Shards int `json:"-" msgpack:"n"`
	// SessionTimeout (heartbeat): how long the membership lasts without another heartbeat.
	SessionTimeout time.Duration `json:"session_timeout,omitempty" msgpack:"st"`
	// HaltThreshold (heartbeat, park): the group halts when this many cells are parked
	// (0: never). The latest value sent wins.
	HaltThreshold int `json:"halt_threshold,omitempty" msgpack:"ht"`
	// Start (heartbeat): the start position, stored when the group is created.
	Start Start `json:"start,omitzero" msgpack:"sp"`
	// Released (heartbeat): shards the worker gives up (answering a Revoke).
	Released []int `json:"released,omitempty" msgpack:"rl"`
	// Commits (heartbeat, commit, leave): offsets to commit, each fenced by its Epoch.
	Commits []Offset `json:"commits,omitempty" msgpack:"c"`
	// Park (park): the cell to park; Epoch fences it.
	Park *ParkedCell `json:"park,omitempty" msgpack:"p"`
	// Epoch (park, resolve): the worker's lease epoch of the cell's shard.
	Epoch uint64 `json:"epoch,omitempty" msgpack:"e"`
	// IDs (resolve, retry, drop) names parked cells; All (retry, drop) names every one.
	IDs []uint64 `json:"ids,omitempty" msgpack:"ids"`
	All bool     `json:"all,omitempty" msgpack:"all"`
}

// Result is the coordinator's answer to a Command.
type Result struct {
	// Generation counts membership changes of the group.
	Generation uint64 `json:"generation" msgpack:"g"`
	// Members are the live members, sorted by ID.
	Members []Member `json:"members" msgpack:"m"`
	// Assigned (heartbeat): the shards the worker owns now, sorted by shard.
	Assigned []Lease `json:"assigned,omitempty" msgpack:"a"`
	// Revoke (heartbeat): owned shards the worker must release (another member should own
	// them): finish the cell in hand, commit, and list them in Released.
	Revoke []int `json:"revoke,omitempty" msgpack:"rv"`
	// SessionExpires (heartbeat): when the worker's membership ends without another heartbeat.
	SessionExpires time.Time `json:"session_expires,omitzero" msgpack:"x"`
	// Halted: parked cells reached the halt threshold; workers stop delivering.
	Halted bool `json:"halted" msgpack:"h"`
	// Parked counts the cells parked and not marked for retry.
	Parked int `json:"parked" msgpack:"p"`
	// Retry (heartbeat): parked cells marked for retry on shards the worker owns.
	Retry []ParkedCell `json:"retry,omitempty" msgpack:"ry"`
	// Accepted (heartbeat, commit, leave): per commit, whether it was applied (false: fenced,
	// the worker does not hold that shard's lease at that epoch).
	Accepted []bool `json:"accepted,omitempty" msgpack:"ac"`
	// Fenced (park, resolve): the command was refused because the worker does not hold the
	// lease at Epoch.
	Fenced bool `json:"fenced,omitempty" msgpack:"f"`
	// Affected (resolve, retry, drop): the number of parked cells changed; (park) the parked
	// cell's ID.
	Affected uint64 `json:"affected,omitempty" msgpack:"af"`
}

// Status is a read-only view of a group for operators.
type Status struct {
	Group         string       `json:"group"`
	Generation    uint64       `json:"generation"`
	Start         Start        `json:"start"`
	HaltThreshold int          `json:"halt_threshold"`
	Halted        bool         `json:"halted"`
	Members       []Member     `json:"members"`
	Leases        []Lease      `json:"leases"`
	Parked        []ParkedCell `json:"parked"`
}

// MaxGroupNameBytes bounds a consumer group's name (it is part of the coordinator's KV keys,
// which storage bounds at 255 bytes).
const MaxGroupNameBytes = 128

// ValidGroupName reports whether name can name a consumer group: 1 to MaxGroupNameBytes bytes
// of letters, digits, '-', '_' and '.'. The error names what is wrong.
func ValidGroupName(name string) error {
	if name == "" || len(name) > MaxGroupNameBytes {
		return fmt.Errorf("group name must be 1 to %d bytes, got %d", MaxGroupNameBytes, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("group name %q: only letters, digits, '-', '_' and '.' are allowed", name)
		}
	}
	return nil
}
