package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/wire"
)

// Limits of consumer-group requests.
const (
	// maxWorkerIDBytes bounds a worker id.
	maxWorkerIDBytes = 128
	// maxParkErrorBytes bounds the error kept with a parked cell; longer ones are cut.
	maxParkErrorBytes = 4096
	// maxSessionTimeout bounds a member's session.
	maxSessionTimeout = 10 * time.Minute
)

// groupOps are the group commands served at POST /v1/{ds}/groups/{group}/{op}.
var groupOps = map[string]consumer.Op{
	"heartbeat": consumer.OpHeartbeat, "commit": consumer.OpCommit, "leave": consumer.OpLeave,
	"park": consumer.OpPark, "resolve": consumer.OpResolve, "retry": consumer.OpRetry, "drop": consumer.OpDrop,
}

// groupCommand checks a wire command and turns it into a consumer.Command; errors name the field.
func groupCommand(op consumer.Op, in wire.GroupCommand, shards int) (consumer.Command, *httpError) {
	cmd := consumer.Command{Op: op, Worker: in.Worker, HaltThreshold: in.HaltThreshold, Released: in.Released,
		Epoch: in.Epoch, IDs: in.IDs, All: in.All}
	switch op {
	case consumer.OpHeartbeat, consumer.OpCommit, consumer.OpLeave, consumer.OpPark, consumer.OpResolve:
		if in.Worker == "" || len(in.Worker) > maxWorkerIDBytes {
			return cmd, invalid("worker", "a worker id of 1 to %d bytes is required", maxWorkerIDBytes)
		}
	}
	if in.SessionTimeout != "" {
		d, err := time.ParseDuration(in.SessionTimeout)
		if err != nil || d <= 0 || d > maxSessionTimeout {
			return cmd, invalid("session_timeout", "%q must be a duration in (0, %s]", in.SessionTimeout, maxSessionTimeout)
		}
		cmd.SessionTimeout = d
	}
	if in.HaltThreshold < 0 {
		return cmd, invalid("halt_threshold", "%d is negative", in.HaltThreshold)
	}
	if in.Start != nil {
		switch consumer.StartKind(in.Start.Kind) {
		case consumer.StartEarliest, consumer.StartLatest:
			cmd.Start = consumer.Start{Kind: consumer.StartKind(in.Start.Kind)}
		case consumer.StartTimestamp:
			if in.Start.Time == nil {
				return cmd, invalid("start.time", "required with kind timestamp")
			}
			cmd.Start = consumer.Start{Kind: consumer.StartTimestamp, Time: in.Start.Time.UTC()}
		default:
			return cmd, invalid("start.kind", "%q must be earliest, latest or timestamp", in.Start.Kind)
		}
	}
	for i, s := range in.Released {
		if s < 0 || s >= shards {
			return cmd, invalid("released["+strconv.Itoa(i)+"]", "%d is not a shard (0..%d)", s, shards-1)
		}
	}
	for i, c := range in.Commits {
		if c.Shard < 0 || c.Shard >= shards {
			return cmd, invalid("commits["+strconv.Itoa(i)+"].shard", "%d is not a shard (0..%d)", c.Shard, shards-1)
		}
		if c.Offset < 0 {
			return cmd, invalid("commits["+strconv.Itoa(i)+"].offset", "%d is negative", c.Offset)
		}
		cmd.Commits = append(cmd.Commits, consumer.Offset{Shard: c.Shard, Epoch: c.Epoch, Offset: c.Offset})
	}
	if op == consumer.OpPark {
		p := in.Park
		if p == nil {
			return cmd, invalid("park", "the cell to park is required")
		}
		if p.Shard < 0 || p.Shard >= shards {
			return cmd, invalid("park.shard", "%d is not a shard (0..%d)", p.Shard, shards-1)
		}
		rk, err := uuid.Parse(p.RowKey)
		if err != nil {
			return cmd, invalid("park.row_key", "%q is not a UUID", p.RowKey)
		}
		msg := p.Error
		if len(msg) > maxParkErrorBytes {
			msg = msg[:maxParkErrorBytes]
		}
		cmd.Park = &consumer.ParkedCell{ID: p.ID, Shard: p.Shard, AddedID: p.AddedID, RowKey: rk, ColumnKey: p.ColumnKey,
			RefKey: p.RefKey, Error: msg, Attempts: p.Attempts}
	}
	if (op == consumer.OpRetry || op == consumer.OpDrop) && !in.All && len(in.IDs) == 0 {
		return cmd, invalid("ids", "name parked cells by id, or set all")
	}
	return cmd, nil
}

func toWireParked(p consumer.ParkedCell) wire.GroupParked {
	return wire.GroupParked{ID: p.ID, Shard: p.Shard, AddedID: p.AddedID, RowKey: p.RowKey.String(), ColumnKey: p.ColumnKey,
		RefKey: p.RefKey, Error: p.Error, Attempts: p.Attempts, Worker: p.Worker, ParkedAt: p.ParkedAt, Retry: p.Retry}
}

func toWireMembers(ms []consumer.Member) []wire.GroupMember {
	out := make([]wire.GroupMember, len(ms))
	for i, m := range ms {
		out[i] = wire.GroupMember{ID: m.ID, Expires: m.Expires, Shards: m.Shards}
	}
	return out
}

func toWireResult(r consumer.Result) wire.GroupResult {
	out := wire.GroupResult{Generation: r.Generation, Members: toWireMembers(r.Members), Revoke: r.Revoke,
		Halted: r.Halted, Parked: r.Parked, Accepted: r.Accepted, Fenced: r.Fenced, Affected: r.Affected}
	for _, l := range r.Assigned {
		out.Assigned = append(out.Assigned, wire.GroupLease{Shard: l.Shard, Owner: l.Owner, Epoch: l.Epoch, Offset: l.Offset})
	}
	if !r.SessionExpires.IsZero() {
		t := r.SessionExpires
		out.SessionExpires = &t
	}
	for _, p := range r.Retry {
		out.Retry = append(out.Retry, toWireParked(p))
	}
	return out
}

// groupName reads and checks the {group} path value.
func groupName(r *http.Request) (string, *httpError) {
	g := r.PathValue("group")
	if err := consumer.ValidGroupName(g); err != nil {
		return "", invalid("group", "%v", err)
	}
	return g, nil
}

// groupCommandHandler serves POST /v1/{ds}/groups/{group}/{op}.
func (s *Server) groupCommandHandler(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{maxBody: s.cfg.MaxRequestBytes})
	if err != nil {
		return err
	}
	group, he := groupName(r)
	if he != nil {
		return he
	}
	op, ok := groupOps[r.PathValue("op")]
	if !ok {
		return notFound("no group operation %q (heartbeat, commit, leave, park, resolve, retry, drop)", r.PathValue("op"))
	}
	var in wire.GroupCommand
	if err := q.decode(&in, true); err != nil {
		return err
	}
	cmd, he := groupCommand(op, in, q.spec.Shards)
	if he != nil {
		return he
	}
	res, err := s.b.Groups.GroupApply(r.Context(), q.ds, group, cmd)
	if errors.Is(err, consumer.ErrBadCommand) {
		return invalid("body", "%v", err)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toWireResult(res))
	return nil
}

// groupsList serves GET /v1/{ds}/groups.
func (s *Server) groupsList(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	names, err := s.b.Groups.Groups(r.Context(), q.ds, c)
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{}
	}
	writeJSON(w, http.StatusOK, wire.GroupsResponse{Groups: names})
	return nil
}

// groupStatus serves GET /v1/{ds}/groups/{group}: the coordinator state with each shard's lag.
func (s *Server) groupStatus(w http.ResponseWriter, r *http.Request) error {
	q, err := s.parse(r, want{})
	if err != nil {
		return err
	}
	group, he := groupName(r)
	if he != nil {
		return he
	}
	c, he := consistency(r)
	if he != nil {
		return he
	}
	gp, err := s.b.Groups.GroupProgress(r.Context(), q.ds, group, c)
	if errors.Is(err, cluster.ErrUnknownGroup) {
		return notFound("%v", err)
	}
	if err != nil {
		return err
	}
	st := gp.Status
	out := wire.GroupStatus{Group: st.Group, Generation: st.Generation, Start: wire.GroupStart{Kind: string(st.Start.Kind)},
		HaltThreshold: st.HaltThreshold, Halted: st.Halted, Members: toWireMembers(st.Members), Parked: []wire.GroupParked{},
		LagCells: gp.LagCells, LagSeconds: gp.LagSeconds}
	if out.Start.Kind == "" {
		out.Start.Kind = string(consumer.StartEarliest)
	}
	if !st.Start.Time.IsZero() {
		t := st.Start.Time
		out.Start.Time = &t
	}
	for _, sp := range gp.Shards {
		out.Shards = append(out.Shards, wire.GroupShardStatus{Shard: sp.Shard, Owner: sp.Owner, Epoch: sp.Epoch, Offset: sp.Offset,
			HighWater: sp.HighWater, LagCells: sp.LagCells, LagSeconds: sp.LagSeconds})
	}
	for _, p := range st.Parked {
		out.Parked = append(out.Parked, toWireParked(p))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
