// Package triggers runs code on the cells of a datastore as they land: a worker of a consumer
// group reads the per-shard logs (get_cells_for_shard, in added_id order) of the shards the
// group gives it, calls a handler for each cell, and commits its offsets to the datastore.
//
//	err := triggers.Run(ctx, triggers.Config{Source: cl.TriggerSource(), Group: "billing", ColumnKey: "BASE"},
//		func(ctx context.Context, c cells.Cell) error { return bill(ctx, c) })
//
// (cl is a *client.Client bound to the datastore.) RunBatch calls a handler once per page of
// a shard (at most BatchSize cells) and never parks; RunPages gives each page to a page
// handler first and, when that fails, its cells one by one to a cell handler, which parks as
// Run does: one request per page while the cells are good, and a bad cell still parked alone.
//
// # Erased rows
//
// A handler also gets the tombstones of erased rows (cells.Key.IsTombstone: column key
// cells.TombstoneColumn, an empty body), in log order with the cells, even with a ColumnKey:
// the row's cells before it are gone from the datastore. A handler that derives data from cells
// should drop what it derived for the row, and must not write a cell back into it.
//
// # Sources
//
// A worker reaches the datastore through a Source (Config.Source), an interface of three calls:
// read a page of several shards' logs, read one cell, run a group command. The package declares
// the interface and implements none: a worker in any process uses the HTTP client's
// (client.Client.TriggerSource, over the HTTP API); a worker inside a node's process, such as the
// index maintainer's, uses an in-process Source over its cluster node (maintainer.Source) and
// never calls its own process over HTTP. The guarantees below hold with either: they rest on the
// coordinator's leases and epochs, not on the transport.
//
// # Guarantees
//
//   - At least once: an offset is committed only after the handler returned nil for every cell
//     up to it (or the cell was parked). A worker that dies, is paused or loses its lease leaves
//     the cells after its last commit to the next owner, which delivers them again: duplicates
//     happen only around failures and rebalances, so handlers must be idempotent (write cells
//     with a deterministic key: a second write is "exists").
//   - Ordered per shard: one shard's cells reach the handler one at a time in added_id order
//     (with RunBatch and RunPages, a page at a time).
//     Different shards are delivered concurrently (Config.Concurrency).
//   - One owner per shard: the group's coordinator (a raft-replicated state machine on one
//     partition of the datastore, package consumer) grants each shard to one live member at a
//     time under a lease with an epoch. Commits carry the epoch and are refused once the shard
//     has a newer one, so a paused old owner that wakes up cannot move the offset. The worker
//     also stops calling the handler for a shard once its lease may have ended by its own clock
//     (the heartbeat's send time plus the session timeout minus a margin), so it does not
//     deliver past its lease, assuming clocks that advance at about the same rate.
//   - Failures: a handler error is retried with exponential backoff up to MaxAttempts; then the
//     cell is parked (kept by the coordinator with its error, listed by `schemaless triggers
//     parked list`) and the shard moves on. When HaltThreshold cells are parked the group halts:
//     every worker stops and Run returns ErrHalted, surfacing a systematic bug instead of parking
//     everything. `parked retry` redelivers parked cells (and can un-halt the group), `parked
//     drop` discards them.
//
// # Membership
//
// Workers join by heart-beating (HeartbeatInterval) and leave when Run returns. A worker that
// stops heart-beating loses its shards SessionTimeout after its last heartbeat (default 3s);
// they go to the other members at their next heartbeat, so a dead worker's shards move within
// SessionTimeout + HeartbeatInterval. Shards are split evenly and stickily (see package
// consumer).
//
// # Metrics
//
// With Config.Registerer set: schemaless_triggers_lag_cells and schemaless_triggers_lag_seconds
// (per group and shard: cells of the shard's log after the worker's position, and the age of the
// oldest of them), schemaless_triggers_delivered_total, _handler_errors_total, _parked_total and
// _owned_shards.
package triggers
