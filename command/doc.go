// Package command is the write vocabulary of a partition: the commands a partition applies
// (cell appends with their writes, conditions and idempotency keys; consumer-group, index,
// schema and erase commands), their outcomes, and the one versioned encoding that carries them
// in raft log entries, in async mode's shared applies and in the node-to-node RPC.
//
// # Encoding
//
// An encoded command is one kind byte (Kind) followed by MessagePack. The kind byte names both
// the command and the version of its layout, so a reader refuses what it does not know
// (ErrBadCommand) instead of misreading it, and a new layout is a new kind byte. Raft logs
// hold these bytes for ever: every layout ever written stays decodable, and Encode keeps
// writing the oldest layout that can hold a command (KindCells for an append of one plain
// write) so that a replica of an older build can apply it. The golden files in testdata pin
// the bytes of every kind.
//
// Outcomes cross the node RPC in the same way: EncodeResult writes a result version byte and
// then MessagePack; a write's outcome has an explicit array layout shared with the request
// records the state machine stores (EncodeRecord).
//
// # Determinism
//
// Every type here is a value the state machine applies on every replica alike: nothing reads
// a clock (CreatedAt is the proposer's, carried in the command), and Write.Fingerprint hashes
// exactly what a write asks so that replicas agree on a reused idempotency key.
//
// The package does no I/O and holds no state; it imports only the pure packages below it
// (cells, consumer, indexes, schemas).
package command
