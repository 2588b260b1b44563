package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/partition"
)

// Location types of a log read.
const (
	// LocationAddedID: Location is an added_id; the read returns the cells after it.
	LocationAddedID = partition.LocationAddedID
	// LocationTimestamp: the read starts at the first cell created at or after LogRead.Time.
	LocationTimestamp = partition.LocationTimestamp
)

// ShardLocation is where to read one shard's log from.
type ShardLocation = partition.ShardLocation

// LogRead is a read of the logs of several shards (get_cells_for_shard and its batch form).
type LogRead struct {
	// Shards to read, each after its Location (an added_id; ignored for LocationTimestamp).
	Shards []ShardLocation
	// LocationType is LocationAddedID (default when "") or LocationTimestamp.
	LocationType string
	// Time is the start of a LocationTimestamp read.
	Time time.Time
	// ColumnKey, when set, keeps only the cells of that column and the tombstones of erased
	// rows.
	ColumnKey string
	// Limit bounds the cells returned per shard; it must be positive.
	Limit int
	// Wait, when positive, long-polls: if no shard has a cell to return, the read waits until
	// one has or Wait passes (then it answers with no cells).
	Wait time.Duration
	// Consistency: Strong reads the partition leader after a read index; Stale any replica
	// (added_id order is the same on every replica, so a consumer may read any).
	Consistency Consistency
}

// LogPage is the answer for one shard: its cells in added_id order, the location to read on
// from, and HighWater, the shard's highest added_id when the page was read.
type LogPage = partition.LogPage

// ReadLogs reads the logs of req.Shards, one page per shard in the order given. Shards are
// grouped by partition and the partitions read in parallel. Every partition answers what it
// has; only when none has a cell does the read long-poll (req.Wait), returning as soon as one
// partition has cells (the others then answer empty pages, their locations and high-water
// marks as the first read found them).
//
// Errors: ErrUnknownDatastore, ErrBadShard (a shard out of range or given twice),
// ErrUnavailable.
func (n *Node) ReadLogs(ctx context.Context, ds string, req LogRead) ([]LogPage, error) {
	return rerouted(ctx, n, func() ([]LogPage, error) { return n.readLogs(ctx, ds, req) })
}

func (n *Node) readLogs(ctx context.Context, ds string, req LogRead) ([]LogPage, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	groups := map[*route][]int{}
	var order []*route
	seen := map[int]bool{}
	for i, sl := range req.Shards {
		if sl.Shard < 0 || sl.Shard >= d.spec.Shards {
			return nil, fmt.Errorf("%w: %d not in 0..%d", ErrBadShard, sl.Shard, d.spec.Shards-1)
		}
		if seen[sl.Shard] {
			return nil, fmt.Errorf("%w: shard %d given twice", ErrBadShard, sl.Shard)
		}
		seen[sl.Shard] = true
		r := d.routeOf(sl.Shard)
		if _, ok := groups[r]; !ok {
			order = append(order, r)
		}
		groups[r] = append(groups[r], i)
	}
	out := make([]LogPage, len(req.Shards))
	for i, sl := range req.Shards {
		out[i] = LogPage{Shard: sl.Shard, NextLocation: sl.Location, HighWater: -1}
	}
	// First every partition is read without waiting, so each answers whatever it has: a
	// partition that always has cells never starves the others. Only when none has a cell do
	// the partitions long-poll, and the first to answer with cells ends the others' waits.
	found, err := n.readLogGroups(ctx, ds, req, order, groups, 0, out)
	if err != nil || found || req.Wait <= 0 {
		return out, err
	}
	for i := range req.Shards {
		req.Shards[i].Location = out[i].NextLocation // past cells of other columns
	}
	_, err = n.readLogGroups(ctx, ds, req, order, groups, req.Wait, out)
	return out, err
}

// readLogGroups reads each partition's group of shards in parallel, waiting up to wait, and
// writes the pages it gets into out. When waiting, the first partition to answer with cells
// ends the others' waits; their pages stay as they were in out. It reports whether any page
// holds cells.
func (n *Node) readLogGroups(ctx context.Context, ds string, req LogRead, order []*route, groups map[*route][]int,
	wait time.Duration, out []LogPage) (bool, error) {
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	errs := make([]error, len(order))
	var mu sync.Mutex
	var wg sync.WaitGroup
	found := false
	for gi, r := range order {
		idx := groups[r]
		lr := &partition.LogRead{LocationType: req.LocationType, Time: req.Time, ColumnKey: req.ColumnKey, Limit: req.Limit, Wait: wait}
		if wait > 0 {
			lr.LocationType = LocationAddedID // the first read resolved the time
		}
		for _, i := range idx {
			lr.Shards = append(lr.Shards, req.Shards[i])
		}
		rr := readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: req.Consistency, Read: partition.ReadRequest{Log: lr}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(waitCtx, r, rr)
			if err == nil && len(resp.Pages) != len(idx) {
				err = fmt.Errorf("cluster: log read answered %d pages for %d shards", len(resp.Pages), len(idx))
			}
			if err != nil {
				if waitCtx.Err() != nil && ctx.Err() == nil {
					return // another partition answered first
				}
				errs[gi] = err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			gotCells := false
			for j, i := range idx {
				out[i] = resp.Pages[j]
				gotCells = gotCells || len(resp.Pages[j].Cells) > 0
			}
			if gotCells {
				found = true
				if wait > 0 {
					stopWaiting()
				}
			}
		}()
	}
	wg.Wait()
	return found, errors.Join(errs...)
}

// CoordinatorShard returns the shard whose partition holds the coordinator state of group
// (consumer.CoordinatorShard: a stable hash of the name modulo the shard count).
func CoordinatorShard(group string, shards int) int { return consumer.CoordinatorShard(group, shards) }

// GroupApply runs one consumer-group command on the group's coordinator (the leader of the
// partition holding CoordinatorShard), setting cmd.Shards to the datastore's shard count.
//
// Errors: ErrUnknownDatastore; ErrBadGroup (an invalid group name); consumer.ErrBadCommand
// (refused, nothing changed); ErrUnavailable (not applied); ErrIndeterminate
// (maybe applied; retrying is safe).
func (n *Node) GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error) {
	if err := consumer.ValidGroupName(group); err != nil {
		return consumer.Result{}, fmt.Errorf("%w: %w", ErrBadGroup, err)
	}
	// Refused as out of range (a split or merge gave the group to another partition), the
	// command applied nothing: it goes again by the newer catalog.
	return rerouted(ctx, n, func() (consumer.Result, error) {
		r, shards, err := n.groupRoute(ds, group)
		if err != nil {
			return consumer.Result{}, err
		}
		cmd.Shards = shards
		return callLeaderOp(ctx, n, groupOp, ds, r, &command.Group{Group: group, Cmd: cmd})
	})
}

// groupRoute returns the partition of datastore ds that coordinates group as this node routes
// it now (a split or merge may move it), and the datastore's shard count. Errors:
// ErrUnknownDatastore.
func (n *Node) groupRoute(ds, group string) (*route, int, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, 0, err
	}
	return d.routeOf(CoordinatorShard(group, d.spec.Shards)), d.spec.Shards, nil
}

// GroupStatus reads the coordinator state of group with consistency c. A group that does not
// exist returns ErrUnknownGroup.
func (n *Node) GroupStatus(ctx context.Context, ds, group string, c Consistency) (consumer.Status, error) {
	if err := consumer.ValidGroupName(group); err != nil {
		return consumer.Status{}, fmt.Errorf("%w: %w", ErrBadGroup, err)
	}
	resp, err := rerouted(ctx, n, func() (partition.ReadResult, error) {
		r, shards, err := n.groupRoute(ds, group)
		if err != nil {
			return partition.ReadResult{}, err
		}
		return n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
			Read: partition.ReadRequest{Group: &partition.GroupRead{Group: group, Shards: shards}}})
	})
	if err != nil {
		return consumer.Status{}, err
	}
	if resp.Group == nil {
		return consumer.Status{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
	}
	return *resp.Group, nil
}

// Groups lists the consumer groups of datastore ds, sorted, reading every partition with
// consistency c.
func (n *Node) Groups(ctx context.Context, ds string, c Consistency) ([]string, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return nil, err
	}
	var (
		mu    sync.Mutex
		names []string
		errs  = make([]error, len(d.partitions))
		wg    sync.WaitGroup
	)
	for i, r := range d.partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(ctx, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c,
				Read: partition.ReadRequest{Groups: &partition.GroupsRead{Shards: d.spec.Shards}}})
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			names = append(names, resp.Groups...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	sort.Strings(names)
	return names, errors.Join(errs...)
}
