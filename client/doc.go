// Package client is the Go client of the datastore's HTTP API: typed calls for every API
// operation, sent to any node of a cluster with retries and failover.
//
// # Usage
//
//	cfg := client.DefaultConfig()
//	cfg.Endpoints = []string{"http://10.0.0.1:7070", "http://10.0.0.2:7070", "http://10.0.0.3:7070"}
//	cfg.Datastore = "trips"
//	c, err := client.New(cfg)
//	...
//	res, err := c.PutCell(ctx, rowKey, "BASE", 1, json.RawMessage(`{"origin":"LAX"}`))
//	switch {
//	case errors.Is(err, client.ErrConflict):      // another body is stored at this key
//	case errors.Is(err, client.ErrIndeterminate): // may or may not be stored: retry the same write
//	case err != nil:
//	}
//	cell, err := c.GetCellLatest(ctx, rowKey, "BASE", client.WithConsistency(client.ConsistencyStale))
//
// A Client is safe for concurrent use; WithDatastore makes a cheap copy for another datastore
// sharing the connections, rotation and cool-downs.
//
// # Calls
//
//	PutCell        PUT  /v1/{ds}/cells/{row_key}/{column_key}/{ref_key}   write
//	PutCells       POST /v1/{ds}/cells                                    write
//	GetCell        GET  /v1/{ds}/cells/{row_key}/{column_key}/{ref_key}   read
//	GetCellLatest  GET  /v1/{ds}/cells/{row_key}/{column_key}             read
//	GetRow         GET  /v1/{ds}/cells/{row_key}                          read
//	GetCells       POST /v1/{ds}/cells/get                                read
//	ShardCells     GET  /v1/{ds}/shards/{shard}/cells?location=&limit=    read
//	ReadLog        GET  /v1/{ds}/shards/{shard}/cells (filter, wait, time) read, long poll
//	ReadLogs       POST /v1/{ds}/shards/cells                             read, long poll
//	Tail           ReadLogs in a loop: every new cell of the shard logs     read, long poll
//	GroupCommand   POST /v1/{ds}/groups/{group}/{op}                      write
//	GroupStatus    GET  /v1/{ds}/groups/{group}                           read
//	Groups         GET  /v1/{ds}/groups                                   read
//	GroupStatuses  Groups, then GroupStatus of each                       read
//	DefineIndex    POST /v1/{ds}/indexes                                  write
//	Indexes        GET  /v1/{ds}/indexes                                  read
//	Index          GET  /v1/{ds}/indexes/{index}                          read
//	AliasIndex     POST /v1/{ds}/indexes/{index}/alias                    write
//	DropIndexVersion DELETE /v1/{ds}/indexes/{index}/versions/{version}   write
//	QueryIndex     POST /v1/{ds}/indexes/{index}/query                    read
//	QueryIndexPages QueryIndex following cursors on one version           read
//	WaitIndexVersion Index until a version is ready                       read, polled
//	Cluster        GET  /v1/cluster                                       read
//	ClusterAt      GET  /v1/cluster of one given node                     one attempt, no retry
//	Ready, Healthy GET  /readyz, /healthz of one given node               one attempt, no retry
//	DatastoreReady GET  /readyz?datastore={ds} of one given node          one attempt, no retry
//	Metric         GET  /metrics of one given node                        one attempt, no retry
//
// Admin calls (admin.go, backup.go) name their datastore in the arguments; the client's
// Datastore does not matter:
//
//	Nodes          GET    /v1/admin/nodes                                 read
//	Partitions     GET    /v1/admin/partitions[?datastore=]               read
//	AddVoter       POST   /v1/admin/partitions/{ds}/{p}/voters            admin change
//	RemoveVoter    DELETE /v1/admin/partitions/{ds}/{p}/voters/{node}     admin change
//	TransferLeader POST   /v1/admin/partitions/{ds}/{p}/leader            admin change
//	MoveReplica    POST   /v1/admin/partitions/{ds}/{p}/move              admin change
//	Rebalance      POST   /v1/admin/rebalance                             admin change
//	Datastores     GET    /v1/admin/datastores                            read
//	CreateDatastore POST  /v1/admin/datastores                            admin change
//	DropDatastore  DELETE /v1/admin/datastores/{name}?confirm={name}      admin change
//	SplitPartition POST   /v1/admin/partitions/{ds}/{p}/split             admin change
//	MergePartitions POST  /v1/admin/partitions/{ds}/merge                 admin change
//	Drain          POST   /v1/admin/nodes/{node}/drain                    admin change
//	Backup         GET    /v1/admin/backup/{ds}/{p}                       read until the stream starts
//	Restore        POST   /v1/admin/restore/{ds}/{p}[?force=true]         admin change, streamed body
//
// Storage status (the async datastores' storage clusters: each member's role, breaker, GTID
// position and lag, the buffered writes) is part of Cluster's answer (wire.PartitionStatus).
// The async partition move and MySQL promotion are not API routes: `schemaless admin
// move-partition` and `admin promote` run them against the MySQL servers.
//
// Reads carry ?consistency= (Config.Consistency, or WithConsistency per call). Keys and bodies
// are checked before sending (column key [A-Za-z0-9_]{1,64}, ref key >= 0, body one JSON
// object): a bad one fails with ErrInvalidArgument and a *cells.FieldError, with no request.
// Answers are checked against the request (keys, result counts, statuses, shard log order); an
// answer that breaks the API contract is ErrBadResponse.
//
// # Trigger workers
//
// Client.TriggerSource is the client as a triggers.Source, the datastore as a consumer-group
// worker of package triggers uses it (log reads with stored bodies, cell reads, group
// commands), for a worker in any process:
//
//	err := triggers.Run(ctx, triggers.Config{Source: c.TriggerSource(), Group: "billing", ColumnKey: "BASE"}, handle)
//
// Its calls are retried and failed over as every other call (see Retries and failover).
//
// # Leader routing
//
// A single-row write (PutCell) or strong read (GetCell, GetCellLatest) is served by the leader
// of the row's partition; a node that is not the leader forwards it, which costs a hop. Every
// such answer carries the datastore's shard count (header Schemaless-Shards) and the leader's
// base URL as the answering node knows it (Schemaless-Leader). The client remembers, per
// datastore and shard, the endpoint of that leader, computes a new row's shard with
// cells.ShardOf, and tries that endpoint first; a failed attempt there forgets it. This is a
// hint only: a stale one costs the forwarding hop again, never a wrong answer. Requests about
// several rows (PutCells, GetCells, GetRow) and stale reads rotate as below.
// Config.NoLeaderRouting turns it off. A leader URL that is not one of Config.Endpoints (a
// node behind a load balancer, say) is not used.
//
// # Retries and failover
//
// Each call picks its endpoint order once: round robin from a rotating start index, so that
// successive calls spread over the nodes, with the endpoints in cool-down (EndpointCooldown, 1s,
// after a connection error, a timeout or a 5xx answer) moved to the end. Attempt n goes to the
// n-th endpoint of that order (wrapping around), so every retry goes to the next node. Before a
// retry the call waits a full-jitter exponential backoff (Config.BackoffBase, BackoffMax), or
// the answer's Retry-After capped at BackoffMax when that is longer. A call makes at most
// Config.MaxAttempts attempts, each bounded by Config.RequestTimeout (plus the wait of a long
// poll), and never waits past ctx.
//
// Writes are idempotent in this datastore (writing a stored cell again with the same body
// answers "exists"), so the client retries them as freely as reads except after a 500. What an
// attempt's outcome leads to:
//
//	outcome of an attempt                        read                  write
//	-------------------------------------------  --------------------  ------------------------------
//	connection refused, dial error (not sent)    retry                 retry
//	timeout, connection lost after sending       retry                 retry; may have been applied
//	503 unavailable (no leader, no quorum)       retry (Retry-After)   retry (Retry-After)
//	408, 429                                     retry (Retry-After)   retry (Retry-After)
//	504 indeterminate                            retry                 retry; may have been applied
//	500 internal, other 5xx                      retry                 final: ErrInternal
//	400, 404, 409, 413, other 4xx                final                 final
//	2xx breaking the contract                    final: ErrBadResponse final: ErrBadResponse
//	ctx done                                     final: ctx.Err()      final: ctx.Err()
//
// An admin change may not be safe to run twice (a rebalance, a leadership transfer to any
// voter), so it is retried only when it certainly did not start; a caller that knows a change
// is idempotent says so with AdminIdempotent, and it is then retried after everything but a 4xx:
//
//	outcome of an attempt                        admin change          AdminIdempotent change
//	-------------------------------------------  --------------------  ------------------------------
//	connection refused, dial error (not sent)    retry                 retry
//	timeout, connection lost after sending       final: indeterminate  retry; may have been applied
//	503 unavailable (no leader, out of time)     retry (Retry-After)   retry (Retry-After)
//	408, 429                                     retry (Retry-After)   retry (Retry-After)
//	504 indeterminate                            final: indeterminate  retry; may have been applied
//	500 internal, other 5xx                      final: ErrInternal    retry
//	400, 404, 409, 413, other 4xx                final                 final
//
// One attempt of an admin change is bounded by Config.AdminTimeout (31m), of an admin read by
// RequestTimeout; Backup and Restore stream for as long as the partition takes, bounded by ctx
// only. Backup is retried as a read until a node starts the stream, never after.
//
// When the attempts run out, the call returns the last attempt's error: for a read, connection
// errors, timeouts, 503 and 504 are ErrUnavailable and other 5xx ErrInternal; for a write,
// connection errors before sending and 503 are ErrUnavailable. A write that any attempt may have
// applied ends with ErrIndeterminate (and not ErrUnavailable) unless a later attempt succeeded
// or got a 4xx answer; if ctx ends after such an attempt, or during one that had sent its
// request, the error wraps both ErrIndeterminate and ctx.Err(). Reads never return
// ErrIndeterminate.
//
// Errors answered by a node are *APIError values (status, code, message, field, endpoint),
// which unwrap to the sentinel of their code: use errors.Is for the kind and errors.As for the
// details.
//
// # Caveats
//
//   - After a retry, a write's status says what the last attempt saw: a cell stored by an
//     earlier, timed-out attempt reports StatusExists, not StatusCreated. Both mean the cell
//     holds the body written.
//   - ErrIndeterminate means "unknown", never "failed": retry the same write (same key, same
//     body) to learn the outcome. ErrInternal on a write is unknown too.
//   - PutCells reports conflicts per cell, with a nil error; PutCell reports a conflict as an
//     error (ErrConflict) with a result whose Status is StatusConflict.
//   - A call can take up to MaxAttempts × RequestTimeout plus the backoffs; bound it with ctx.
//   - Cool-downs and the rotation belong to a Client and its WithDatastore copies, not to the
//     process; the cool-down is fixed (EndpointCooldown) and only orders endpoints, it never
//     skips one.
//   - A Retry-After from one node also delays the next attempt, which goes to another node.
//   - Stale reads may go to a different node each time, so two stale reads in a row can see
//     the data go backwards. Strong reads do not.
//   - Answers are read whole into memory; a large ShardCells limit makes a large answer.
//   - Writes carry an Idempotency-Key header (random per call, or IdempotencyKey's): the server
//     answers a retry of the call with the recorded outcome of the attempt that applied it (for
//     10 minutes), and net/http may resend the request on a kept-alive connection that the
//     server had closed before reading it.
package client
