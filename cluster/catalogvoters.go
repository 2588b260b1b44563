package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/wire"
)

// Moving the catalog's votes. The catalog's raft group starts on the topology file's first
// catalogVoters nodes; MoveCatalogVoters gives its votes to other nodes, so that those nodes
// can be drained and retired. The catalog records its voters (catalog.Catalog.Voters), so every
// node learns them with the catalog and caches them with it: a node listed opens a replica of
// the group (empty: the leader adds it), a node no longer listed closes its replica and deletes
// it, and a node that follows polls the voters, or any node it knows when they do not answer
// (serveCatalogFetch answers from the catalog a node serves).

const (
	// catalogLeaderlessCheck is how long a voter waits for its group's news before asking other
	// nodes, when its group has no leader.
	catalogLeaderlessCheck = 5 * time.Second
	// catalogCatchUp bounds the wait for a new voter to hold the catalog before an old one is
	// removed.
	catalogCatchUp = 30 * time.Second
)

// MoveCatalogVoters makes voters the voters of the catalog's raft group, one membership change
// at a time, and returns the catalog generation that records them. voters are 1 to
// catalog.MaxVoters distinct ids of nodes the cluster knows (3 or 5 keep a majority through a
// node's loss). It runs on the catalog's leader, wherever this node is:
//
//  1. the catalog records the old and new voters together, so that every new one opens an
//     empty replica of the group;
//  2. each new voter is added (raft AddVoter) and the leader waits until it holds the catalog;
//  3. each old voter not kept is removed (RemoveServer), the leader last: it first hands its
//     leadership to a voter that stays, and the new leader goes on;
//  4. the catalog records the new voters: the removed nodes close and delete their replicas.
//
// An interruption leaves a group that works (every step is one safe change); calling it again
// with the same voters finishes. Blocks until done or ctx ends. Errors: a *FieldError
// ("voters": empty, too many, repeated or unknown ids), ErrNoCatalog, ErrIndeterminate, ctx's.
func (n *Node) MoveCatalogVoters(ctx context.Context, voters []string) (wire.CatalogVotersResponse, error) {
	if err := n.checkVoterIDs(voters); err != nil {
		return wire.CatalogVotersResponse{}, err
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSetVoters, Voters: voters})
	if errors.Is(err, catalog.ErrBadCommand) {
		return wire.CatalogVotersResponse{}, &FieldError{Field: "voters", Msg: err.Error()}
	}
	if err != nil {
		return wire.CatalogVotersResponse{}, err
	}
	return wire.CatalogVotersResponse{Generation: res.Generation, Voters: slices.Clone(voters)}, nil
}

// checkVoterIDs checks a list of catalog voters: 1 to catalog.MaxVoters distinct known nodes.
func (n *Node) checkVoterIDs(voters []string) error {
	if len(voters) == 0 || len(voters) > catalog.MaxVoters {
		return &FieldError{Field: "voters", Msg: fmt.Sprintf("%d voters: want 1 to %d (3 or 5 keep a majority through a node's loss)", len(voters), catalog.MaxVoters)}
	}
	for i, id := range voters {
		if slices.Index(voters, id) != i {
			return &FieldError{Field: "voters", Msg: fmt.Sprintf("%q is listed twice", id)}
		}
		if spec, ok := n.nodeSpec(id); !ok || spec.RaftAddr == "" {
			return &FieldError{Field: "voters", Msg: fmt.Sprintf("%q is not a node this cluster knows (see GET /v1/admin/nodes)", id)}
		}
	}
	return nil
}

// moveCatalogVoters runs MoveCatalogVoters's steps on the catalog's leader rep (proposeCatalog
// of an OpSetVoters command). It returns ErrNoCatalog after handing its leadership over (step
// 3): the sender tries again with the new leader.
func (n *Node) moveCatalogVoters(ctx context.Context, rep *catalogReplica, cmd catalog.Command) (catalog.Result, error) {
	target := cmd.Voters
	if err := n.checkVoterIDs(target); err != nil {
		return catalog.Result{}, fmt.Errorf("%w: %v", catalog.ErrBadCommand, err)
	}
	cf := rep.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return catalog.Result{}, fmt.Errorf("%w: %v", ErrNoCatalog, err)
	}
	var old []string
	for _, s := range cf.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			old = append(old, string(s.ID))
		}
	}
	self := n.cfg.NodeID
	if !slices.Contains(target, self) {
		// The leader leaves last: a voter that stays leads the rest of the move.
		for _, id := range target {
			if slices.Contains(old, id) {
				spec, _ := n.nodeSpec(id)
				if err := rep.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(spec.RaftAddr)).Error(); err != nil {
					return catalog.Result{}, fmt.Errorf("%w: hand the catalog's leadership to %s: %v", ErrNoCatalog, id, err)
				}
				return catalog.Result{}, fmt.Errorf("%w: the catalog's leadership moved to %s, which goes on", ErrNoCatalog, id)
			}
		}
		return catalog.Result{}, fmt.Errorf("%w: set-voters: keep at least one of the current voters %v (move the votes in steps)", catalog.ErrBadCommand, old)
	}
	added := slices.DeleteFunc(slices.Clone(target), func(id string) bool { return slices.Contains(old, id) })
	removed := slices.DeleteFunc(slices.Clone(old), func(id string) bool { return slices.Contains(target, id) })
	if len(added) > 0 {
		// 1. Every node learns the new voters, which open their replicas.
		both := append(slices.Clone(old), added...)
		res, err := n.commitCatalog(ctx, rep, catalog.Command{Op: catalog.OpSetVoters, Voters: both})
		if err != nil {
			return res, err
		}
		// 2. Each joins and catches up.
		for _, id := range added {
			spec, _ := n.nodeSpec(id)
			if err := rep.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(spec.RaftAddr), 0, 0).Error(); err != nil {
				return catalog.Result{}, fmt.Errorf("%w: add %s to the catalog's voters: %v", ErrNoCatalog, id, err)
			}
			n.log.Info("catalog: voter added", "node", id)
			if err := n.awaitCatalogAt(ctx, id, res.Generation); err != nil {
				return catalog.Result{}, fmt.Errorf("%w: the new catalog voter %s did not catch up (it stays a voter; run the move again): %v", ErrIndeterminate, id, err)
			}
		}
	}
	// 3. The old voters leave.
	for _, id := range removed {
		if err := rep.raft.RemoveServer(raft.ServerID(id), 0, 0).Error(); err != nil {
			return catalog.Result{}, fmt.Errorf("%w: remove %s from the catalog's voters: %v", ErrNoCatalog, id, err)
		}
		n.log.Info("catalog: voter removed", "node", id)
	}
	// 4. The catalog records the voters.
	return n.commitCatalog(ctx, rep, cmd)
}

// awaitCatalogAt waits until node id's replica of the catalog holds generation gen (its fetch
// answer comes from its replica: catalogFetchAnswer.Voter).
func (n *Node) awaitCatalogAt(ctx context.Context, id string, gen uint64) error {
	ctx, cancel := context.WithTimeout(ctx, catalogCatchUp)
	defer cancel()
	for {
		spec, ok := n.nodeSpec(id)
		if !ok {
			return fmt.Errorf("%w: node %s", ErrUnknownNode, id)
		}
		var ans catalogFetchAnswer
		err := n.forward(ctx, spec, catalogFetchPath, catalogFetchRPC{After: gen - 1, WaitMicros: time.Second.Microseconds()}, into(&ans), false, time.Second)
		if err == nil && ans.Voter {
			if c, derr := catalog.Decode(ans.Catalog); derr == nil && c.Generation >= gen {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reconcileCatalogReplica opens this node's replica of the catalog when the catalog lists it
// as a voter and it holds none, and closes and deletes it when the catalog no longer lists it
// (the group removed it first: MoveCatalogVoters). It reports whether it changed anything.
// The catalog's follower goroutine only (followCatalog).
func (n *Node) reconcileCatalogReplica() bool {
	voter := slices.Contains(n.catalogVoterIDs(), n.cfg.NodeID)
	rep := n.catalogReplica()
	switch {
	case voter && rep == nil:
		r, err := n.openCatalogReplica()
		if err != nil {
			n.log.Error("catalog: opening this node's voter", "error", err)
			return false
		}
		n.cat.mu.Lock()
		n.cat.rep = r
		n.cat.mu.Unlock()
		n.log.Info("catalog: this node is a voter of the catalog now")
		return true
	case !voter && rep != nil:
		n.cat.mu.Lock()
		n.cat.rep = nil
		n.cat.mu.Unlock()
		err := errors.Join(rep.close(), os.RemoveAll(filepath.Join(n.cfg.DataDir, "catalog")))
		n.log.Info("catalog: this node is no voter of the catalog any more: its replica is deleted", "error", err)
		return true
	}
	return false
}

// catalogSources returns the nodes a follower polls for the catalog: the voters, then every
// other node of the topology file (any node answers with the catalog it serves), this node
// left out unless it is all there is.
func (n *Node) catalogSources() []string {
	var out []string
	for _, id := range n.catalogVoterIDs() {
		if id != n.cfg.NodeID {
			out = append(out, id)
		}
	}
	for _, s := range n.cfg.Topology.Nodes {
		if s.ID != n.cfg.NodeID && !slices.Contains(out, s.ID) {
			out = append(out, s.ID)
		}
	}
	if len(out) == 0 {
		return n.catalogVoterIDs()
	}
	return out
}

// pollCatalogOnce asks the other nodes, in turn, for a catalog newer than this node's, and
// applies the first it gets.
func (n *Node) pollCatalogOnce() {
	for _, id := range n.catalogSources() {
		if id == n.cfg.NodeID {
			continue
		}
		if cat, err := n.fetchCatalog(id, time.Second); err == nil {
			n.applyCatalog(cat)
			return
		}
	}
}

// servedCatalog returns the catalog this node serves and a channel closed when it changes
// (serveCatalogFetch on a node that holds no replica of the catalog).
func (n *Node) servedCatalog() (*catalog.Catalog, <-chan struct{}) {
	n.cat.mu.Lock()
	ch := n.cat.applied
	n.cat.mu.Unlock()
	return n.cat.cur.Load(), ch
}
