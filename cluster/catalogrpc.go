package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/raft"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schemaless-db/schemaless/catalog"
)

// The catalog's node-to-node RPCs: a follower's long poll of a voter, and a command sent to
// the catalog's leader (see catalog.go).

// catalogFetchRPC asks for the catalog once its generation is above After, waiting up to
// WaitMicros; catalogFetchAnswer carries it (catalog.Encode).
type catalogFetchRPC struct {
	After      uint64
	WaitMicros int64
}

type catalogFetchAnswer struct {
	Catalog []byte
	// Voter: the answer comes from the node's replica of the catalog group.
	Voter bool `msgpack:",omitempty"`
}

// fetchCatalog long-polls node id (a voter, or any node: serveCatalogFetch) for a catalog
// above this node's generation.
func (n *Node) fetchCatalog(id string, wait time.Duration) (*catalog.Catalog, error) {
	spec, ok := n.nodeSpec(id)
	if !ok {
		return nil, fmt.Errorf("%w: node %s", ErrUnknownNode, id)
	}
	var after uint64
	if c := n.cat.cur.Load(); c != nil {
		after = c.Generation
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	var ans catalogFetchAnswer
	if err := n.forward(ctx, spec, catalogFetchPath, catalogFetchRPC{After: after, WaitMicros: wait.Microseconds()}, into(&ans), false, wait); err != nil {
		return nil, err
	}
	return catalog.Decode(ans.Catalog)
}

// serveCatalogFetch answers a follower's long poll: this node's catalog once its generation is
// above the asked one, or its current one when the wait ends.
func (n *Node) serveCatalogFetch(w http.ResponseWriter, r *http.Request) {
	var req catalogFetchRPC
	if err := decodeRPC(r, &req); err != nil {
		writeRPCError(w, fmt.Errorf("%w: %v", ErrBadRPC, err))
		return
	}
	// A voter answers from its replica; another node from the catalog it serves (a node that
	// does not know the voters yet, or only former ones, learns them from any node).
	current := n.servedCatalog
	rep := n.catalogReplica()
	if rep != nil {
		current = rep.fsm.current
	}
	if cat, _ := current(); cat == nil {
		writeRPCError(w, fmt.Errorf("%w: node %s knows no catalog yet", ErrUnavailable, n.cfg.NodeID))
		return
	}
	wait := min(time.Duration(max(req.WaitMicros, 0))*time.Microsecond, catalogPollWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		cat, changed := current()
		if cat.Generation > req.After {
			n.answerCatalog(w, cat, rep != nil)
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			n.answerCatalog(w, cat, rep != nil)
			return
		case <-r.Context().Done():
			return
		case <-n.cat.stop:
			writeRPCError(w, ErrClosed)
			return
		}
	}
}

func (n *Node) answerCatalog(w http.ResponseWriter, c *catalog.Catalog, voter bool) {
	b, err := catalog.Encode(c)
	if err != nil {
		writeRPCError(w, err)
		return
	}
	writeRPC(w, http.StatusOK, catalogFetchAnswer{Catalog: b, Voter: voter})
}

// catalogApplyRPC proposes a command to the catalog's leader; catalogApplyAnswer is its
// outcome: the result, or the refusal's kind (catalogErrKinds) and message, or the leader to
// ask instead.
type catalogApplyRPC struct {
	Command catalog.Command
}

type catalogApplyAnswer struct {
	Result   catalog.Result
	ErrKind  string
	ErrMsg   string
	LeaderID string
	Leader   bool // false: this voter does not lead; LeaderID names the one it knows
}

// catalogErrKinds names the catalog's refusals on the wire.
var catalogErrKinds = map[string]error{
	"bad": catalog.ErrBadCommand, "not_found": catalog.ErrNotFound, "exists": catalog.ErrExists,
	"stale": catalog.ErrStale, "corrupt": catalog.ErrCorrupt,
}

func (n *Node) serveCatalogApply(w http.ResponseWriter, r *http.Request) {
	var req catalogApplyRPC
	if err := decodeRPC(r, &req); err != nil {
		writeRPCError(w, fmt.Errorf("%w: %v", ErrBadRPC, err))
		return
	}
	rep := n.catalogReplica()
	if rep == nil {
		writeRPCError(w, fmt.Errorf("%w: node %s holds no replica of the catalog", ErrUnavailable, n.cfg.NodeID))
		return
	}
	if rep.raft.State() != raft.Leader {
		_, id := rep.raft.LeaderWithID()
		writeRPC(w, http.StatusOK, catalogApplyAnswer{LeaderID: string(id)})
		return
	}
	res, err := n.proposeCatalog(r.Context(), rep, req.Command)
	ans := catalogApplyAnswer{Result: res, Leader: true}
	if err != nil {
		for kind, e := range catalogErrKinds {
			if errors.Is(err, e) {
				ans.ErrKind, ans.ErrMsg = kind, err.Error()
			}
		}
		if ans.ErrKind == "" {
			writeRPCError(w, err)
			return
		}
	}
	writeRPC(w, http.StatusOK, ans)
}

// proposeCatalog applies cmd through the catalog's raft group, led by rep (commitCatalog); an
// OpSetVoters command first changes the group's membership (moveCatalogVoters).
func (n *Node) proposeCatalog(ctx context.Context, rep *catalogReplica, cmd catalog.Command) (catalog.Result, error) {
	if cmd.Op == catalog.OpSetVoters {
		return n.moveCatalogVoters(ctx, rep, cmd)
	}
	if cmd.Op == catalog.OpSettings {
		if err := n.checkSettings(cmd.Datastore, cmd.Settings); err != nil {
			return catalog.Result{}, fmt.Errorf("%w: settings of %s: %w", catalog.ErrBadCommand, cmd.Datastore, err)
		}
	}
	if cmd.Op == catalog.OpSetPeer {
		if err := n.checkPeerCommand(cmd); err != nil {
			return catalog.Result{}, fmt.Errorf("%w: peer %s: %w", catalog.ErrBadCommand, cmd.Peer, err)
		}
	}
	return n.commitCatalog(ctx, rep, cmd)
}

// commitCatalog applies cmd through the catalog's raft group, led by rep: stamped with this
// node's clock, committed, applied. Errors: the catalog's refusals; ErrNoCatalog when rep lost
// its leadership first; ErrIndeterminate when the command may have been applied.
func (n *Node) commitCatalog(ctx context.Context, rep *catalogReplica, cmd catalog.Command) (catalog.Result, error) {
	cmd.Now = time.Now()
	b, err := msgpack.Marshal(cmd)
	if err != nil {
		return catalog.Result{}, err
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	f := rep.raft.Apply(b, timeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrEnqueueTimeout) {
			return catalog.Result{}, fmt.Errorf("%w: %v", ErrNoCatalog, err)
		}
		return catalog.Result{}, fmt.Errorf("%w: catalog command: %v", ErrIndeterminate, err)
	}
	a := f.Response().(catalogApplied)
	return a.res, a.err
}

// applyCatalogCommand applies cmd through the catalog's leader, wherever it runs, retrying
// while the catalog elects one, until ctx ends; then waits until this node applied the
// generation the command made. Errors: the catalog's refusals; ErrNoCatalog; ErrIndeterminate
// when the command was sent and its answer lost.
func (n *Node) applyCatalogCommand(ctx context.Context, cmd catalog.Command) (catalog.Result, error) {
	res, err := n.sendCatalogCommand(ctx, cmd)
	if err != nil {
		return res, err
	}
	return res, n.waitGeneration(ctx, res.Generation)
}

// sendCatalogCommand is applyCatalogCommand without the wait for this node to apply it.
func (n *Node) sendCatalogCommand(ctx context.Context, cmd catalog.Command) (catalog.Result, error) {
	voters := n.catalogVoterIDs()
	target := ""
	backoff := n.cfg.RetryBackoff
	var last error = ErrNoCatalog
	for attempt := 0; ; attempt++ {
		if target == "" {
			target = voters[attempt%len(voters)]
		}
		var res catalog.Result
		var err error
		leader := true
		if rep := n.catalogReplica(); rep != nil && target == n.cfg.NodeID {
			if rep.raft.State() == raft.Leader {
				res, err = n.proposeCatalog(ctx, rep, cmd)
			} else {
				leader = false
				_, id := rep.raft.LeaderWithID()
				target = string(id)
			}
		} else {
			spec, ok := n.nodeSpec(target)
			if !ok {
				err = fmt.Errorf("%w: node %s", ErrUnknownNode, target)
			} else {
				var ans catalogApplyAnswer
				wait := time.Duration(0)
				if cmd.Op == catalog.OpSetVoters {
					wait = 2*catalogCatchUp + 10*time.Second // membership changes, a catch-up
				}
				err = n.forward(ctx, spec, catalogApplyPath, catalogApplyRPC{Command: cmd}, into(&ans), true, wait)
				if err == nil {
					switch {
					case !ans.Leader:
						leader = false
						target = ans.LeaderID
					case ans.ErrKind != "":
						kind := catalogErrKinds[ans.ErrKind]
						if kind == nil {
							kind = catalog.ErrBadCommand
						}
						err = fmt.Errorf("%w (%s)", kind, ans.ErrMsg)
					default:
						res = ans.Result
					}
				}
			}
		}
		switch {
		case err == nil && leader:
			return res, nil
		case err != nil && (errors.Is(err, ErrIndeterminate) || catalogRefusal(err)):
			return catalog.Result{}, err
		case err != nil:
			last = err
			target = ""
		}
		select {
		case <-ctx.Done():
			return catalog.Result{}, fmt.Errorf("%w: %w (last: %v)", ErrNoCatalog, ctx.Err(), last)
		case <-n.stopWatch:
			return catalog.Result{}, ErrNodeClosed
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, n.cfg.RetryBackoffMax)
	}
}

// catalogRefusal reports whether err is one of the catalog's refusals (final: retrying gives
// the same answer).
func catalogRefusal(err error) bool {
	for _, e := range catalogErrKinds {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// waitGeneration waits until this node applied catalog generation g or ctx ends.
func (n *Node) waitGeneration(ctx context.Context, g uint64) error {
	for {
		n.cat.mu.Lock()
		ch := n.cat.applied
		n.cat.mu.Unlock()
		if c := n.cat.cur.Load(); c != nil && c.Generation >= g {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: catalog generation %d not applied here yet: %w", ErrUnavailable, g, ctx.Err())
		}
	}
}
