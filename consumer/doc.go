// Package consumer is the coordinator state machine of consumer groups: members, shard leases
// with epochs, committed offsets and parked cells. It is pure and deterministic: a Group changes
// only through Apply, and the same state with the same (now, Command) always gives the same
// Result and the same new state. It reads no clock, draws no random numbers, does no I/O and
// never lets map iteration order reach a result, an assignment or a stored row, so every raft
// replica that applies the same log holds the same groups.
//
// # Model
//
// A group splits the shards 0..Shards-1 of one datastore among its members (workers). A member
// joins and stays by heartbeating (OpHeartbeat) before its session (SessionTimeout, default
// DefaultSessionTimeout) runs out; an expired member is removed and its shards become free.
// Every membership change increments the group's generation.
//
// A shard's Lease has an Owner and an Epoch. Granting a free shard to a member increments the
// shard's epoch (the first grant is epoch 1; epochs are never reset), so a worker's lease is
// (shard, epoch). Offsets (OpCommit, and Commits in OpHeartbeat and OpLeave) and parked cells
// (OpPark, OpResolve) are fenced: they are applied only if the worker is a live member that owns
// the shard at that epoch. A committed offset never moves backward.
//
// # Assignment
//
// Each heartbeat computes a balanced, sticky target owner for every shard from the live members
// sorted by ID: member i of m gets the quota n/m, plus one if i < n%m. Current owners first keep
// their shards (ascending) up to their quota; each remaining shard goes to the member with the
// largest deficit, ties to the lowest index. A new member therefore only takes shards from
// members over their quota. The heartbeating worker is granted its target shards that are free;
// it waits for target shards another member still owns, and is told to give up (Revoke) owned
// shards whose target is another member. It keeps owning those until it lists them in Released
// or its session ends, so two members never own a shard at once.
//
// # Clock
//
// now is the raft leader's clock carried in the log entry. A group keeps the highest now it has
// seen and uses max(now, that), so its time never goes backward when leadership moves to a node
// whose clock is behind. All times a Group stores and answers are in UTC without a monotonic
// reading.
//
// # Persistence
//
// A group is stored as key-value rows relative to the group: "meta" (MessagePack: members,
// generation, clock, start, shard count, halt threshold, halted flag, parked cells and the
// parked-cell ID counter) and "shard/<n>" (MessagePack: one shard's owner, epoch and offset).
// Dirty returns the rows changed since the last ResetDirty; Load rebuilds an equal Group from
// every row Dirty ever returned.
//
// # Concurrency
//
// A Group is not safe for concurrent use. The FSM applies a batch to Clones and installs them
// only after its SQL transaction commits; a Group read by other goroutines must not be mutated.
//
// # Caveats
//
// The meta row holds the parked cells and the clock, so every command that moves the clock
// rewrites it; a group with many parked cells (no halt threshold) writes a large row per command.
// Changing the shard count (a heartbeat with another Shards) keeps the leases of the shards that
// remain; the leases of removed shards are dropped (Dirty lists their rows in del).
package consumer
