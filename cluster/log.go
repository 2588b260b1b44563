package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// Location types of a log read.
const (
	// LocationAddedID: Location is an added_id; the read returns the cells after it.
	LocationAddedID = "added_id"
	// LocationTimestamp: the read starts at the first cell created at or after LogRead.Time.
	LocationTimestamp = "timestamp"
)

// ShardLocation is where to read one shard's log from.
type ShardLocation struct {
	Shard    int
	Location int64
}

// LogRead is a read of the logs of several shards (get_cells_for_shard and its batch form).
type LogRead struct {
	// Shards to read, each after its Location (an added_id; ignored for LocationTimestamp).
	Shards []ShardLocation
	// LocationType is LocationAddedID (default when "") or LocationTimestamp.
	LocationType string
	// Time is the start of a LocationTimestamp read.
	Time time.Time
	// ColumnKey, when set, keeps only the cells of that column.
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
type LogPage struct {
	Shard        int
	Cells        []cells.Cell
	NextLocation int64
	HighWater    int64
}

// ReadLogs reads the logs of req.Shards, one page per shard in the order given. Shards are
// grouped by partition and the partitions read in parallel. Every partition answers what it
// has; only when none has a cell does the read long-poll (req.Wait), returning as soon as one
// partition has cells (the others then answer empty pages, their locations and high-water
// marks as the first read found them).
//
// Errors: ErrUnknownDatastore, ErrBadShard (a shard out of range or given twice),
// partition.ErrUnavailable.
func (n *Node) ReadLogs(ctx context.Context, ds string, req LogRead) ([]LogPage, error) {
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
	found, err := n.readLogGroups(ctx, ds, d, req, order, groups, 0, out)
	if err != nil || found || req.Wait <= 0 {
		return out, err
	}
	for i := range req.Shards {
		req.Shards[i].Location = out[i].NextLocation // past cells of other columns
	}
	_, err = n.readLogGroups(ctx, ds, d, req, order, groups, req.Wait, out)
	return out, err
}

// readLogGroups reads each partition's group of shards in parallel, waiting up to wait, and
// writes the pages it gets into out. When waiting, the first partition to answer with cells
// ends the others' waits; their pages stay as they were in out. It reports whether any page
// holds cells.
func (n *Node) readLogGroups(ctx context.Context, ds string, d *datastore, req LogRead, order []*route, groups map[*route][]int,
	wait time.Duration, out []LogPage) (bool, error) {
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	errs := make([]error, len(order))
	var mu sync.Mutex
	var wg sync.WaitGroup
	found := false
	for gi, r := range order {
		idx := groups[r]
		rr := readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: req.Consistency, Op: "log",
			Log: logRequest{LocationType: req.LocationType, Time: req.Time, ColumnKey: req.ColumnKey, Limit: req.Limit, Wait: wait}}
		if wait > 0 {
			rr.Log.LocationType = LocationAddedID // the first read resolved the time
		}
		for _, i := range idx {
			rr.Log.Shards = append(rr.Log.Shards, req.Shards[i])
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.read(waitCtx, d, r, rr)
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

// logRequest is the log part of a readRequest, for one partition.
type logRequest struct {
	Shards       []ShardLocation
	LocationType string
	Time         time.Time
	ColumnKey    string
	Limit        int
	Wait         time.Duration
}

// readLog serves a log read from this node's replica st (already read-indexed for strong
// reads), long-polling on the replica's applied index.
func (n *Node) readLog(ctx context.Context, r *route, st *storage.PartitionStore, req logRequest) ([]LogPage, error) {
	shards := r.spec.Shards()
	locs := make([]int64, len(req.Shards))
	for i, sl := range req.Shards {
		if !shards.Contains(sl.Shard) {
			return nil, fmt.Errorf("%w: shard %d is not in partition %d", ErrBadShard, sl.Shard, r.spec.ID)
		}
		locs[i] = sl.Location
		if req.LocationType == LocationTimestamp {
			loc, err := st.LocationAt(ctx, sl.Shard, req.Time)
			if err != nil {
				return nil, fmt.Errorf("cluster: location of %s in shard %d: %w", req.Time.Format(time.RFC3339Nano), sl.Shard, err)
			}
			locs[i] = loc
		}
	}
	var deadline <-chan time.Time
	if req.Wait > 0 {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		deadline = t.C
	}
	var sm logWatch
	if r.async != nil {
		sm = r.async
	} else {
		p, err := r.mustLocal()
		if err != nil {
			return nil, err
		}
		sm = p.FSM()
	}
	for {
		changed := sm.AppliedChanged() // taken before reading, so no apply is missed
		pages := make([]LogPage, len(req.Shards))
		found := false
		for i, sl := range req.Shards {
			pages[i] = LogPage{Shard: sl.Shard, NextLocation: locs[i]}
			if h, ok := sm.HighWater(sl.Shard); ok && h <= locs[i] {
				pages[i].HighWater = h
				continue // nothing new: no SQL
			}
			cs, next, high, err := st.ReadLog(ctx, sl.Shard, locs[i], req.ColumnKey, req.Limit)
			if err != nil {
				return nil, fmt.Errorf("cluster: read log of shard %d: %w", sl.Shard, err)
			}
			pages[i] = LogPage{Shard: sl.Shard, Cells: cs, NextLocation: next, HighWater: high}
			locs[i] = next
			found = found || len(cs) > 0
		}
		if found || deadline == nil {
			return pages, nil
		}
		select {
		case <-changed:
		case <-deadline:
			return pages, nil
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return pages, nil
			}
			return nil, fmt.Errorf("%w: %v", partition.ErrUnavailable, ctx.Err())
		}
	}
}

// logWatch tells a long poll when to read again, and what it may skip: the FSM of a raft
// replica, or an async partition (which polls).
type logWatch interface {
	AppliedChanged() <-chan struct{}
	HighWater(shard int) (int64, bool)
}

// CoordinatorShard returns the shard whose partition holds the coordinator state of group: a
// stable hash (FNV-1a, 32 bits) of the name modulo the shard count.
func CoordinatorShard(group string, shards int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(group))
	return int(h.Sum32() % uint32(shards))
}

// GroupApply runs one consumer-group command on the group's coordinator (the leader of the
// partition holding CoordinatorShard), setting cmd.Shards to the datastore's shard count.
//
// Errors: ErrUnknownDatastore; ErrBadGroup (an invalid group name); consumer.ErrBadCommand
// (refused, nothing changed); partition.ErrUnavailable (not applied); partition.ErrIndeterminate
// (maybe applied; retrying is safe).
func (n *Node) GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return consumer.Result{}, err
	}
	if err := consumer.ValidGroupName(group); err != nil {
		return consumer.Result{}, fmt.Errorf("%w: %v", ErrBadGroup, err)
	}
	cmd.Shards = d.spec.Shards
	r := d.routeOf(CoordinatorShard(group, d.spec.Shards))
	var res consumer.Result
	err = n.callLeader(ctx, r, true,
		func(ctx context.Context) (err error) {
			if r.async != nil {
				res, err = r.async.ApplyGroup(ctx, group, cmd)
				return err
			}
			p, err := r.mustLocal()
			if err != nil {
				return err
			}
			res, err = p.ApplyGroup(ctx, group, cmd)
			return err
		},
		func(ctx context.Context, target topology.NodeSpec) (err error) {
			req := groupRPC{Datastore: ds, Partition: r.spec.ID, Group: group, TimeoutMicros: remainingMicros(ctx, n.cfg.ForwardTimeout), Cmd: cmd}
			var resp groupRPCResponse
			err = n.forward(ctx, target, rpcGroupPath, &req, &resp, true, 0)
			res = resp.Result
			return err
		})
	return res, err
}

// GroupStatus reads the coordinator state of group with consistency c. A group that does not
// exist returns ErrUnknownGroup.
func (n *Node) GroupStatus(ctx context.Context, ds, group string, c Consistency) (consumer.Status, error) {
	d, err := n.datastore(ds)
	if err != nil {
		return consumer.Status{}, err
	}
	if err := consumer.ValidGroupName(group); err != nil {
		return consumer.Status{}, fmt.Errorf("%w: %v", ErrBadGroup, err)
	}
	r := d.routeOf(CoordinatorShard(group, d.spec.Shards))
	resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "group", Group: group})
	if err != nil {
		return consumer.Status{}, err
	}
	if resp.Status == nil {
		return consumer.Status{}, fmt.Errorf("%w: %s", ErrUnknownGroup, group)
	}
	return *resp.Status, nil
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
			resp, err := n.read(ctx, d, r, readRequest{Datastore: ds, Partition: r.spec.ID, Consistency: c, Op: "groups"})
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

// readGroup serves the "group" and "groups" read ops from st.
func readGroup(ctx context.Context, st *storage.PartitionStore, req readRequest) (readResponse, error) {
	var resp readResponse
	if req.Op == "groups" {
		names, err := fsm.GroupNames(ctx, st)
		resp.Groups = names
		return resp, err
	}
	g, err := fsm.LoadGroup(ctx, st, req.Group)
	if err != nil {
		return resp, err
	}
	if g.Exists() {
		s := g.Status(time.Now())
		resp.Status = &s
	}
	return resp, nil
}

// Group RPC: one consumer-group command forwarded to the coordinator partition's leader.
const rpcGroupPath = "/internal/v1/group"

// statusBadCommand answers a group command the coordinator refused.
const statusBadCommand = http.StatusUnprocessableEntity

type groupRPC struct {
	Datastore     string
	Partition     int
	Group         string
	TimeoutMicros int64
	Cmd           consumer.Command
}

type groupRPCResponse struct {
	Result consumer.Result
}

func (n *Node) serveGroup(w http.ResponseWriter, r *http.Request) {
	var req groupRPC
	if err := decodeRPC(r, &req); err != nil {
		http.Error(w, "bad group request: "+err.Error(), http.StatusBadRequest)
		return
	}
	p := n.hostedReplica(w, req.Datastore, req.Partition)
	if p == nil {
		return
	}
	ctx, cancel := rpcContext(r, req.TimeoutMicros)
	defer cancel()
	res, err := p.ApplyGroup(ctx, req.Group, req.Cmd)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, groupRPCResponse{Result: res})
}
