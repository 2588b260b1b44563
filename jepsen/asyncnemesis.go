package jepsen

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/replication"
)

// Nemesis kinds of async mode, acting on the storage clusters (Storage). Each holds one cluster
// while it lasts, so two of them never act on one cluster at once.
const (
	// KillMaster kills -9 a random cluster's master; at the end it is restarted and unfenced
	// (an operator restarting the master, no promotion). Meanwhile writes to its partition are
	// answered buffered, and writes to partitions buffered on it fail.
	KillMaster = "kill-master"
	// Failover kills -9 a master and promotes a minion (replication.Promote). At the end the old
	// master restarts fenced and is repointed at the new master; if it does not replicate
	// cleanly (a diverged old master), it stays fenced and out of the cluster. At most one
	// failover per cluster per run (with PartitionFailover).
	Failover = "failover"
	// PartitionMaster cuts a master from its minions, both directions (iptables on the link
	// addresses); the nodes still reach it and it goes on taking writes that no minion gets.
	PartitionMaster = "partition-master"
	// PartitionFailover is the lossy failover: a master is cut from its minions for half the
	// mean fault duration, then killed -9 while cut off, and a minion is promoted. The writes
	// the master acknowledged during the cut are on no minion: only the buffers hold them. It
	// counts as the cluster's failover.
	PartitionFailover = "partition-failover"
	// PauseReplication stops a random minion's SQL thread (replication.PauseReplication), then
	// resumes it.
	PauseReplication = "pause-replication"
)

// AsyncNemeses lists the storage nemeses of async mode.
var AsyncNemeses = []string{KillMaster, Failover, PartitionMaster, PartitionFailover, PauseReplication}

// AllAsyncNemeses is what --nemesis all means in async mode: the storage nemeses and the node
// process faults (the nodes are stateless there; node partitions cut nothing they use).
var AllAsyncNemeses = append(slices.Clone(AsyncNemeses), KillRandom, PauseRandom)

// IsStorageNemesis reports whether kind acts on the storage clusters of async mode.
func IsStorageNemesis(kind string) bool { return slices.Contains(AsyncNemeses, kind) }

// NeedsLinks reports whether kind cuts replication links (and so needs the link addresses).
func NeedsLinks(kind string) bool { return kind == PartitionMaster || kind == PartitionFailover }

// SetStorage gives the storage nemeses their target. Call it before Run; without it the storage
// kinds are dropped from the schedule.
func (n *Nemesis) SetStorage(s *Storage) { n.storage = s }

// startStorageFault starts one storage fault and returns the function that ends it.
func (n *Nemesis) startStorageFault(ctx context.Context, kind string) (func(), error) {
	st := n.storage
	if st == nil {
		return nil, fmt.Errorf("%s: no storage clusters (async mode only)", kind)
	}
	if NeedsLinks(kind) && (n.net == nil || st.links == nil) {
		return nil, fmt.Errorf("%s needs iptables and link addresses", kind)
	}
	healCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 2*time.Minute)
	}
	c, err := st.claim(n.rng, kind)
	if err != nil {
		return nil, err
	}
	master, in := st.Members(c)
	name := st.Name(c, master)
	switch kind {
	case KillMaster:
		if err := st.kill(c, master); err != nil {
			st.release(c)
			return nil, err
		}
		end := n.begin(Fault{Kind: kind, Nodes: []string{name}, Detail: fmt.Sprintf("master %s of cluster c%d killed; heal: restart and unfence", name, c)})
		return func() {
			ctx, cancel := healCtx()
			defer cancel()
			if err := st.restart(ctx, c, master); err != nil {
				n.log.Warn("nemesis: restart the master", "member", name, "error", err)
			} else if err := st.unfence(ctx, c, master); err != nil {
				n.log.Warn("nemesis: unfence the master", "member", name, "error", err)
			}
			st.release(c)
			end()
		}, nil

	case PartitionMaster:
		link := st.linkAddr(c, master)
		if err := n.net.CutLink(ctx, link); err != nil {
			_ = n.net.Heal(context.Background())
			st.release(c)
			return nil, err
		}
		end := n.begin(Fault{Kind: kind, Nodes: []string{name}, Detail: fmt.Sprintf("master %s of cluster c%d cut from its minions (link %s)", name, c, link)})
		return func() {
			if err := n.net.Heal(context.Background()); err != nil {
				n.log.Warn("nemesis: heal network", "error", err)
			}
			st.release(c)
			end()
		}, nil

	case Failover, PartitionFailover:
		detail := fmt.Sprintf("master %s of cluster c%d killed, a minion promoted", name, c)
		var end func()
		if kind == PartitionFailover {
			link := st.linkAddr(c, master)
			if err := n.net.CutLink(ctx, link); err != nil {
				_ = n.net.Heal(context.Background())
				st.release(c)
				return nil, err
			}
			hold := n.cfg.FaultDuration / 2
			end = n.begin(Fault{Kind: kind, Nodes: []string{name}, Detail: fmt.Sprintf("master %s of cluster c%d cut from its minions for %s, then killed, a minion promoted", name, c, hold)})
			select {
			case <-ctx.Done():
				return func() {
					_ = n.net.Heal(context.Background())
					st.release(c)
					end()
				}, nil
			case <-time.After(hold):
			}
		}
		if err := st.kill(c, master); err != nil {
			if end != nil {
				_ = n.net.Heal(context.Background())
				end()
			}
			st.release(c)
			return nil, err
		}
		killed := n.h.Now()
		if end == nil {
			end = n.begin(Fault{Kind: kind, Nodes: []string{name}, Detail: detail})
		}
		pctx, cancel := healCtx()
		rec := st.failover(pctx, c, master, in, kind, killed, n.h.Now)
		cancel()
		n.log.Info("nemesis: failover", "cluster", c, "old_master", rec.OldMaster, "new_master", rec.NewMaster, "caught_up", rec.CaughtUp,
			"error", rec.Error, "seconds", time.Duration(rec.Promoted-rec.Killed).Seconds())
		return func() {
			if kind == PartitionFailover {
				if err := n.net.Heal(context.Background()); err != nil {
					n.log.Warn("nemesis: heal network", "error", err)
				}
			}
			if rec.NewMaster != "" {
				ctx, cancel := healCtx()
				ok, why := st.rejoin(ctx, c, master)
				cancel()
				st.setRejoined(c, ok, why)
				n.log.Info("nemesis: old master after failover", "member", name, "rejoined", ok, "why", why)
			}
			st.release(c)
			end()
		}, nil

	case PauseReplication:
		var minions []int
		for _, m := range in {
			if m == master || !st.running(c, m) {
				continue
			}
			if s, err := st.probe(ctx, c, m); err == nil && st.replicatesFrom(s, c, master) {
				minions = append(minions, m)
			}
		}
		if len(minions) == 0 {
			st.release(c)
			return nil, fmt.Errorf("cluster c%d has no replicating minion", c)
		}
		m := minions[n.rng.IntN(len(minions))]
		if err := st.setPaused(ctx, c, m, true); err != nil {
			st.release(c)
			return nil, err
		}
		end := n.begin(Fault{Kind: kind, Nodes: []string{st.Name(c, m)}, Detail: fmt.Sprintf("replication of minion %s of cluster c%d paused (SQL thread)", st.Name(c, m), c)})
		return func() {
			ctx, cancel := healCtx()
			defer cancel()
			if err := st.setPaused(ctx, c, m, false); err != nil {
				n.log.Warn("nemesis: resume replication", "member", st.Name(c, m), "error", err)
			}
			st.release(c)
			end()
		}, nil
	}
	st.release(c)
	return nil, fmt.Errorf("unknown nemesis %q", kind)
}

// failover promotes a minion of cluster c, whose master old was killed at killed (history
// clock), among the members in; now reads the history's clock. The old master is out of the
// cluster from then on (rejoin may take it back). If Promote fails without promoting, the old
// master is restarted and unfenced, as kill-master's heal does, and the record says why.
func (s *Storage) failover(ctx context.Context, c, old int, in []int, kind string, killed int64, now func() int64) FailoverRecord {
	var dsns []string
	for _, m := range in {
		dsns = append(dsns, s.promoteDSN(c, m))
	}
	res, err := replication.Promote(ctx, dsns, replication.PromoteOptions{ReplUser: s.User(), Logger: s.log.With("cluster", c)})
	rec := FailoverRecord{Kind: kind, Cluster: c, OldMaster: s.Name(c, old), Killed: killed, CaughtUp: res.CaughtUp}
	if nm := s.memberOf(c, res.NewMaster); err == nil && nm >= 0 {
		rec.NewMaster = s.Name(c, nm)
		s.mu.Lock()
		s.master[c] = nm
		s.out[c][old] = "old master of a failover, not restarted yet"
		s.mu.Unlock()
	} else {
		if err == nil {
			err = fmt.Errorf("promoted %q, not a member", res.NewMaster)
		}
		rec.Error = err.Error()
		if rerr := s.restart(ctx, c, old); rerr != nil {
			rec.Error += "; restart the old master: " + rerr.Error()
		} else if uerr := s.unfence(ctx, c, old); uerr != nil {
			rec.Error += "; unfence the old master: " + uerr.Error()
		}
	}
	rec.Promoted = now()
	s.mu.Lock()
	s.failovers = append(s.failovers, rec)
	s.mu.Unlock()
	return rec
}

// setRejoined records what became of the old master of cluster c's failover.
func (s *Storage) setRejoined(c int, ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.failovers) - 1; i >= 0; i-- {
		if s.failovers[i].Cluster == c {
			s.failovers[i].Rejoined, s.failovers[i].OutReason = ok, why
			return
		}
	}
}

// dropStorageKinds returns kinds without the storage nemeses (a Nemesis without storage).
func dropStorageKinds(kinds []string) []string {
	return slices.DeleteFunc(slices.Clone(kinds), IsStorageNemesis)
}
