package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/topology"
)

// Every node RPC handler validates its request as the public API validates the request it came
// from, before acting on it: a node reaching the raft port can send nothing that the API would
// have refused. A refusal is 400 with the message of an error wrapping ErrBadRPC that names the
// field; nothing was done. The backup and restore RPCs (backup.go) are not covered here: a
// backup names only a datastore and a partition, which hostedReplica checks.

// ErrBadRPC: an internal request that a node refuses as the public API would: a datastore or
// partition that does not exist, a key, a ref key, a shard, a name, a limit or a body that no API
// request could have produced. Nothing was done.
var ErrBadRPC = errors.New("cluster: bad internal request")

// Bounds of the node RPC. They sit above what the API sends with its default limits (1000 keys,
// pages of 1000, waits of 30s) so that an API configured more generously still works, and bound
// what a request can make a node allocate or wait for.
const (
	// rpcMaxKeys bounds the cells, keys or row keys of one request.
	rpcMaxKeys = 100_000
	// rpcMaxPage bounds the page size (limit) of a log, versions or index read.
	rpcMaxPage = 100_000
	// rpcMaxWait is the longest long-poll wait of a log read; a longer one is clamped.
	rpcMaxWait = 10 * time.Minute
	// rpcMaxTimeout is the longest time a request may be handled for; a longer one is clamped.
	rpcMaxTimeout = 15 * time.Minute
	// rpcMaxWorkerBytes bounds a consumer-group worker id (the API's bound).
	rpcMaxWorkerBytes = 128
	// rpcMaxParkErrorBytes bounds the error text of a parked cell; a longer one is truncated (as
	// the API truncates it).
	rpcMaxParkErrorBytes = 4096
)

var (
	// rpcNodeIDPattern is the topology's node id pattern.
	rpcNodeIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	// rpcIndexNamePattern is package indexes' index name pattern.
	rpcIndexNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}$`)
	// rpcIndexTablePattern matches indexes.TableName: an index name and a version from 1.
	rpcIndexTablePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}_v[1-9][0-9]{0,9}$`)
	// rpcIndexFieldPattern is package indexes' field name pattern.
	rpcIndexFieldPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,61}$`)
)

// badRPC returns an error wrapping ErrBadRPC for field.
func badRPC(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadRPC, field, fmt.Sprintf(format, args...))
}

// refuseRPC answers a refused request: 400 with err's message.
func refuseRPC(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, command.ErrShardOutOfRange) {
		w.Header().Set(errorKindHeader, shardOutOfRangeKind) // the sender re-routes it
	}
	http.Error(w, "bad "+what+" request: "+err.Error(), http.StatusBadRequest)
}

// rpcRoute returns the route of partition pid of datastore ds named by a request, or an error
// wrapping ErrBadRPC naming the field (the datastore unknown, the partition not one of it).
func (n *Node) rpcRoute(ds string, pid int) (*route, error) {
	d, ok := n.datastores()[ds]
	if !ok {
		// The sender may know a datastore the catalog created a moment ago.
		if d, ok = n.awaitDatastore(ds, time.Second); !ok {
			return nil, badRPC("datastore", "%q is not a datastore of this cluster", ds)
		}
	}
	for _, r := range d.partitions {
		if r.spec.ID == pid {
			return r, nil
		}
	}
	// The sender may know a partition a split made a moment ago.
	if d, ok = n.awaitPartition(ds, pid, time.Second); ok {
		for _, r := range d.partitions {
			if r.spec.ID == pid {
				return r, nil
			}
		}
	}
	// Or one a merge retired: the sender re-routes it (nothing was applied).
	return nil, fmt.Errorf("%w (%w)", badRPC("partition", "%q has no partition %d", ds, pid), command.ErrShardOutOfRange)
}

// retiredPartition reports whether this node's catalog gave partition pid of datastore ds its
// ID (the ID is below the datastore's NextID) and lists it no more: a merge retired it, and no
// catalog change brings it back, so awaitPartition stops waiting for it (rpcRoute's wait for
// a split's new partition, 1 s, which every write sent to the right partition of a merge
// during its freeze waited: BENCHMARKS.md).
func (n *Node) retiredPartition(ds string, pid int) bool {
	c := n.cat.cur.Load()
	if c == nil {
		return false
	}
	d := c.Datastores[ds]
	return d != nil && pid < d.NextID && d.Partition(pid) == nil
}

// rpcContext bounds the handling of a request by the sender's remaining time, clamped to
// rpcMaxTimeout; a sender out of time (0 or less) gets a context already done.
func rpcContext(r *http.Request, timeoutMicros int64) (context.Context, context.CancelFunc) {
	d := rpcMaxTimeout
	if timeoutMicros < rpcMaxTimeout.Microseconds() {
		d = time.Duration(max(timeoutMicros, 0)) * time.Microsecond
	}
	return context.WithTimeout(r.Context(), d)
}

// checkShard returns an error naming field unless shard is rowKey's shard and in partition p.
func checkShard(ds *topology.DatastoreSpec, p *topology.PartitionSpec, field string, row uuid.UUID, shard int) error {
	if err := checkRowShard(ds, field, row, shard); err != nil {
		return err
	}
	return checkInPartition(p, field, shard)
}

// checkRowShard returns an error naming field unless shard is rowKey's shard.
func checkRowShard(ds *topology.DatastoreSpec, field string, row uuid.UUID, shard int) error {
	if want := cells.ShardOf(row, ds.Shards); shard != want {
		return badRPC(field, "shard %d is not the shard of row key %s (%d)", shard, row, want)
	}
	return nil
}

// checkWriteShardOf is checkShard for a write's cells and conditions: the shard may also be one
// of a split child of p (checkWriteShard).
func checkWriteShardOf(ds *topology.DatastoreSpec, p *topology.PartitionSpec, field string, row uuid.UUID, shard int) error {
	if err := checkRowShard(ds, field, row, shard); err != nil {
		return err
	}
	return checkWriteShard(ds, p, field, shard)
}

// checkInPartition returns an error naming field unless shard is one of partition p's.
func checkInPartition(p *topology.PartitionSpec, field string, shard int) error {
	if !p.Shards().Contains(shard) {
		// Also command.ErrShardOutOfRange: a sender routing by an older catalog re-routes it.
		return fmt.Errorf("%w (%w)", badRPC(field, "shard %d is not in partition %d (%d..%d)", shard, p.ID, p.FirstShard, p.LastShard), command.ErrShardOutOfRange)
	}
	return nil
}

// checkCount returns an error naming field unless 0 <= n <= most.
func checkCount(field string, n, most int) error {
	if n > most {
		return badRPC(field, "%d items, at most %d", n, most)
	}
	return nil
}

// validateWrite checks a write sent to partition p of datastore ds over the node RPC as the
// public path checks a request: every cell's key (row key, column key, ref key), its shard
// (the row key's, within the partition or a split child of it: checkWriteShard) and its body
// (zlib-compressed MessagePack of a JSON object), its origin (a cluster name or empty), and
// every condition's column key, ref key and shard; at most rpcMaxKeys cells and
// MaxConditions conditions. The first problem is returned, wrapping ErrBadRPC. It decodes every
// body once.
func validateWrite(ds *topology.DatastoreSpec, p *topology.PartitionSpec, w *command.Write) error {
	if err := checkCount("cells", len(w.Cells), rpcMaxKeys); err != nil {
		return err
	}
	if err := checkCount("conditions", len(w.Conditions), MaxConditions); err != nil {
		return err
	}
	if w.Origin != "" {
		if err := cells.ValidateClusterName("origin", w.Origin); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRPC, err)
		}
	}
	for i := range w.Cells {
		c := &w.Cells[i]
		if err := c.Key.Validate(); err != nil {
			return fmt.Errorf("%w: cell %d: %w", ErrBadRPC, i, err)
		}
		if err := checkWriteShardOf(ds, p, fmt.Sprintf("cell %d", i), c.Key.RowKey, c.Shard); err != nil {
			return err
		}
		if _, err := c.Body.Object(); err != nil {
			return fmt.Errorf("%w: cell %d: body: %w", ErrBadRPC, i, err)
		}
	}
	for i, c := range w.Conditions {
		if err := cells.ValidateColumnKey(c.ColumnKey); err != nil {
			return fmt.Errorf("%w: condition %d: %w", ErrBadRPC, i, err)
		}
		if c.LatestRefKey < 0 {
			return badRPC(fmt.Sprintf("condition %d", i), "ref key %d is negative", c.LatestRefKey)
		}
		if err := checkWriteShardOf(ds, p, fmt.Sprintf("condition %d", i), c.RowKey, c.Shard); err != nil {
			return err
		}
	}
	return nil
}

// validateGroupName checks a consumer group name and that partition p of ds coordinates it.
func validateGroupName(ds *topology.DatastoreSpec, p *topology.PartitionSpec, group string) error {
	if err := consumer.ValidGroupName(group); err != nil {
		return badRPC("group", "%v", err)
	}
	if s := CoordinatorShard(group, ds.Shards); !p.Shards().Contains(s) {
		// Also command.ErrShardOutOfRange: a sender routing by an older catalog re-routes it.
		return fmt.Errorf("%w (%w)", badRPC("partition", "group %q is coordinated by shard %d, not in partition %d", group, s, p.ID), command.ErrShardOutOfRange)
	}
	return nil
}

// validateGroup checks a consumer-group command as the API's group handler does: a valid group
// coordinated by partition p, a known op, a worker id where the op needs one, the datastore's
// shard count, shards of the datastore, offsets and durations not negative. A parked cell's
// error text is truncated to rpcMaxParkErrorBytes.
func validateGroup(ds *topology.DatastoreSpec, p *topology.PartitionSpec, group string, cmd *consumer.Command) error {
	if err := validateGroupName(ds, p, group); err != nil {
		return err
	}
	switch cmd.Op {
	case consumer.OpHeartbeat, consumer.OpCommit, consumer.OpLeave, consumer.OpPark, consumer.OpResolve:
		if cmd.Worker == "" || len(cmd.Worker) > rpcMaxWorkerBytes {
			return badRPC("worker", "a worker id of 1 to %d bytes is required, got %d bytes", rpcMaxWorkerBytes, len(cmd.Worker))
		}
	case consumer.OpRetry, consumer.OpDrop:
		if !cmd.All && len(cmd.IDs) == 0 {
			return badRPC("ids", "name parked cells by id, or set all")
		}
	default:
		return badRPC("op", "%q is not a group operation", cmd.Op)
	}
	if cmd.Shards != ds.Shards {
		return badRPC("shards", "%d, the datastore has %d", cmd.Shards, ds.Shards)
	}
	if cmd.SessionTimeout < 0 {
		return badRPC("session_timeout", "%v is negative", cmd.SessionTimeout)
	}
	if cmd.HaltThreshold < 0 {
		return badRPC("halt_threshold", "%d is negative", cmd.HaltThreshold)
	}
	switch cmd.Start.Kind {
	case "", consumer.StartEarliest, consumer.StartLatest, consumer.StartTimestamp:
	default:
		return badRPC("start.kind", "%q must be earliest, latest or timestamp", cmd.Start.Kind)
	}
	inDatastore := func(field string, s int) error {
		if s < 0 || s >= ds.Shards {
			return badRPC(field, "%d is not a shard (0..%d)", s, ds.Shards-1)
		}
		return nil
	}
	if err := checkCount("released", len(cmd.Released), ds.Shards); err != nil {
		return err
	}
	for i, s := range cmd.Released {
		if err := inDatastore("released["+strconv.Itoa(i)+"]", s); err != nil {
			return err
		}
	}
	if err := checkCount("commits", len(cmd.Commits), ds.Shards); err != nil {
		return err
	}
	for i, c := range cmd.Commits {
		if err := inDatastore("commits["+strconv.Itoa(i)+"].shard", c.Shard); err != nil {
			return err
		}
		if c.Offset < 0 {
			return badRPC("commits["+strconv.Itoa(i)+"].offset", "%d is negative", c.Offset)
		}
	}
	if err := checkCount("ids", len(cmd.IDs), rpcMaxKeys); err != nil {
		return err
	}
	if cmd.Op == consumer.OpPark {
		if cmd.Park == nil {
			return badRPC("park", "the cell to park is required")
		}
		if err := inDatastore("park.shard", cmd.Park.Shard); err != nil {
			return err
		}
		if len(cmd.Park.Error) > rpcMaxParkErrorBytes {
			cmd.Park.Error = cmd.Park.Error[:rpcMaxParkErrorBytes]
		}
	}
	return nil
}

// validateSchema checks a schema command as PutSchema checks a registration: a valid column
// key, a version from 1, a schema that compiles.
func validateSchema(cmd *command.Schema) error {
	if err := cells.ValidateColumnKey(cmd.Column); err != nil {
		return badRPC("column", "%q: %v", cmd.Column, err)
	}
	if cmd.Version < 1 {
		return badRPC("version", "%d, want 1 or more", cmd.Version)
	}
	if _, err := schemas.Compile(cmd.Text); err != nil {
		return badRPC("text", "%v", err)
	}
	return nil
}

// validateAdminRaft checks a membership operation: a raft partition of a known datastore, a
// known op, a well-formed node id where the op names a node and a host:port address where it
// needs one.
func (n *Node) validateAdminRaft(req *adminRaftRPC) error {
	r, err := n.rpcRoute(req.Datastore, req.Partition)
	if err != nil {
		return err
	}
	if r.ds.Mode == topology.ModeAsync {
		return badRPC("datastore", "%q is async: it has no raft configuration", req.Datastore)
	}
	needNode, needAddr := false, false
	switch req.Op {
	case raftOpConfig, raftOpCommittedConfig:
	case raftOpAddNonvoter, raftOpAddVoter:
		needNode, needAddr = true, true
	case raftOpRemove:
		needNode = true
	case raftOpTransfer:
		needNode, needAddr = req.Node != "", req.Node != ""
	default:
		return badRPC("op", "%q is not a raft operation", req.Op)
	}
	if needNode && !rpcNodeIDPattern.MatchString(req.Node) {
		return badRPC("node", "%q is not a node id", req.Node)
	}
	if needAddr {
		host, port, err := net.SplitHostPort(req.Addr)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
			return badRPC("addr", "%q is not a host:port address", req.Addr)
		}
	}
	return nil
}

// validateAdminHost checks a hosting change: a raft partition of a known datastore, op host
// or unhost.
func (n *Node) validateAdminHost(req *adminHostRPC) error {
	r, err := n.rpcRoute(req.Datastore, req.Partition)
	if err != nil {
		return err
	}
	if r.ds.Mode == topology.ModeAsync {
		return badRPC("datastore", "%q is async: its partitions are not hosted by nodes", req.Datastore)
	}
	if req.Op != "host" && req.Op != "unhost" {
		return badRPC("op", "%q, want host or unhost", req.Op)
	}
	return nil
}
