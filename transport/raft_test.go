package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/hclogslog"
)

// logFSM records every command it applies.
type logFSM struct {
	mu      sync.Mutex
	applied []string
}

func (f *logFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(l.Data))
	return len(f.applied)
}

func (f *logFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return logSnapshot(strings.Join(f.applied, "\n")), nil
}

func (f *logFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = nil
	if len(b) > 0 {
		f.applied = strings.Split(string(b), "\n")
	}
	return nil
}

func (f *logFSM) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

type logSnapshot string

func (s logSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := io.WriteString(sink, string(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s logSnapshot) Release() {}

// replica is one partition replica on one node.
type replica struct {
	raft *raft.Raft
	fsm  *logFSM
}

// startGroup starts partition name as a raft group with one replica per mux, over the muxes'
// RaftLayers, and stops it at the end of the test (before the muxes close).
func startGroup(t *testing.T, name string, muxes []*Mux) []replica {
	t.Helper()
	var servers []raft.Server
	for i, m := range muxes {
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       raft.ServerID(fmt.Sprintf("n%d", i)),
			Address:  raft.ServerAddress(m.Addr().String()),
		})
	}
	log := testLogger(t)
	reps := make([]replica, len(muxes))
	for i, m := range muxes {
		layer, err := m.RaftLayer(name)
		require.NoError(t, err, "%s node %d: RaftLayer", name, i)
		hl := hclogslog.New(log.With("partition", name, "node", i), "raft")
		trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  layer,
			MaxPool: 3,
			Timeout: 2 * time.Second,
			Logger:  hl,
		})
		assert.Equal(t, m.Addr().String(), string(trans.LocalAddr()), "%s node %d: transport LocalAddr: want the mux address", name, i)
		conf := raft.DefaultConfig()
		conf.LocalID = servers[i].ID
		conf.HeartbeatTimeout = 300 * time.Millisecond
		conf.ElectionTimeout = 300 * time.Millisecond
		conf.LeaderLeaseTimeout = 150 * time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		conf.Logger = hl
		store := raft.NewInmemStore()
		f := &logFSM{}
		r, err := raft.NewRaft(conf, f, store, store, raft.NewInmemSnapshotStore(), trans)
		require.NoError(t, err, "%s node %d: NewRaft", name, i)
		t.Cleanup(func() {
			assert.NoError(t, r.Shutdown().Error(), "%s node %d: Shutdown", name, i)
			trans.Close()
		})
		require.NoError(t, r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(), "%s node %d: bootstrap", name, i)
		reps[i] = replica{raft: r, fsm: f}
	}
	return reps
}

// leaderOf returns the replica that leads, if one does and every replica knows it, or nil.
func leaderOf(reps []replica) *raft.Raft {
	var leader *raft.Raft
	for _, r := range reps {
		if r.raft.State() == raft.Leader {
			leader = r.raft
		}
	}
	if leader == nil {
		return nil
	}
	addr, _ := leader.LeaderWithID()
	for _, r := range reps {
		if a, _ := r.raft.LeaderWithID(); a != addr {
			return nil
		}
	}
	return leader
}

// history is what a client knows of the commands it sent to one group: acked committed,
// maybe have an unknown outcome (leadership lost while in flight), with the error that said so.
type history struct {
	mu    sync.Mutex
	acked []string
	maybe map[string]error
}

// ackedLen returns how many commands were acknowledged.
func (h *history) ackedLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.acked)
}

// apply sends cmd to the group's current leader, trying again while no replica leads or the one
// asked is not the leader (nothing was done then), for up to 20 s. It records the outcome in h.
// It may run in a goroutine other than the test's.
func apply(t *testing.T, name string, reps []replica, h *history, cmd string) {
	t.Helper()
	assert.Eventually(t, func() bool {
		leader := leaderOf(reps)
		if leader == nil {
			return false
		}
		err := leader.Apply([]byte(cmd), 5*time.Second).Error()
		if errors.Is(err, raft.ErrNotLeader) {
			return false
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if err != nil {
			h.maybe[cmd] = err
		} else {
			h.acked = append(h.acked, cmd)
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "%s: Apply %q: no leader accepted it within 20s", name, cmd)
	h.mu.Lock()
	err, unknown := h.maybe[cmd]
	h.mu.Unlock()
	if unknown {
		t.Logf("%s: Apply %q: %v (outcome unknown)", name, cmd, err)
	}
}

// requireConverged waits up to 10 s until every replica's FSM holds the same commands: every
// acked one, in order, and no command other than h's (no other group's, no duplicate of an acked
// one). The group must take no more commands meanwhile.
func requireConverged(t *testing.T, name string, reps []replica, h *history) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		h.mu.Lock()
		defer h.mu.Unlock()
		first := reps[0].fsm.commands()
		for i, r := range reps[1:] {
			assert.Equal(c, first, r.fsm.commands(), "node %d's commands: want node 0's", i+1)
		}
		var acked []string
		for _, cmd := range first {
			if _, unknown := h.maybe[cmd]; unknown {
				continue
			}
			if assert.True(c, slices.Contains(h.acked, cmd), "command %q was never sent to %s", cmd, name) {
				acked = append(acked, cmd)
			}
		}
		assert.Equal(c, h.acked, acked, "acknowledged commands in the FSMs")
	}, 10*time.Second, 10*time.Millisecond, "%s: replicas did not converge within 10s", name)
}

// TestRaftAndRPCOverMux runs two raft groups (partitions) on three muxes, one per node, and
// node-to-node HTTP on the same ports: both groups elect leaders and replicate their own
// commands only, and every node answers RPC from every other while raft traffic flows.
//
// Not parallel: its raft groups elect with 300 ms timeouts.
func TestRaftAndRPCOverMux(t *testing.T) {
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	var muxes []*Mux
	for _, ip := range ips {
		muxes = append(muxes, newMux(t, ip, nil))
	}
	for i, m := range muxes {
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "node %d got %s from %s", i, body, r.RemoteAddr)
			}),
			IdleTimeout: 2 * time.Minute,
		}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(m.RPCListener()) }()
		t.Cleanup(func() {
			srv.Close()
			assert.ErrorIs(t, <-served, http.ErrServerClosed, "node %d: Serve", i)
		})
	}

	parts := []string{"trips/1", "trips/2"}
	groups := map[string][]replica{}
	for _, p := range parts {
		groups[p] = startGroup(t, p, muxes)
	}
	hist := map[string]*history{}
	for _, p := range parts {
		hist[p] = &history{maybe: map[string]error{}}
		// Leadership may move under a loaded -race run: try again if the outcome is unknown.
		for attempt := 0; hist[p].ackedLen() == 0 && attempt < 3; attempt++ {
			apply(t, p, groups[p], hist[p], fmt.Sprintf("first %s (attempt %d)", p, attempt))
		}
		require.Equal(t, 1, hist[p].ackedLen(), "%s: first command: acknowledged", p)
		requireConverged(t, p, groups[p], hist[p])
	}

	// Raft traffic keeps flowing while every node calls every other over the same ports.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stopApplying := func() {
		cancel()
		wg.Wait()
	}
	defer stopApplying() // on t.Fatal too: before the cleanups stop raft
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				apply(t, p, groups[p], hist[p], fmt.Sprintf("%s #%d", p, i))
			}
		}()
	}
	var reused, requests int
	for round := 0; round < 5; round++ {
		for i, from := range muxes {
			client := from.HTTPClient(5 * time.Second)
			for j, to := range muxes {
				if i == j {
					continue
				}
				trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
					if info.Reused {
						reused++
					}
				}}
				msg := fmt.Sprintf("hello %d", round)
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost,
					"http://"+to.Addr().String()+"/forward", strings.NewReader(msg))
				require.NoError(t, err, "NewRequest")
				resp, err := client.Do(req)
				require.NoError(t, err, "node %d -> node %d", i, j)
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.NoError(t, err, "node %d -> node %d: read the body", i, j)
				requests++
				want := fmt.Sprintf("node %d got %s from %s:", j, msg, ips[i])
				assert.Equal(t, http.StatusOK, resp.StatusCode, "node %d -> node %d: status", i, j)
				assert.True(t, strings.HasPrefix(string(body), want), "node %d -> node %d: got %q, want %q...", i, j, body, want)
			}
		}
	}
	// Let raft traffic flow concurrently for a few more entries before stopping it.
	for _, p := range parts {
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.GreaterOrEqual(c, hist[p].ackedLen(), 3, "%s: commands acknowledged in all", p)
		}, 10*time.Second, 10*time.Millisecond, "%s: want at least 3 commands acknowledged within 10s", p)
	}
	stopApplying()
	// Each node keeps one connection per peer: only the first round dials.
	assert.GreaterOrEqual(t, reused, requests-len(muxes)*(len(muxes)-1),
		"HTTP keep-alive: requests of %d on a reused connection", requests)
	for _, p := range parts {
		requireConverged(t, p, groups[p], hist[p])
	}
}
