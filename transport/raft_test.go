package transport

import (
	"bytes"
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
	"github.com/schemaless-db/schemaless/internal/hclogslog"
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
		if err != nil {
			t.Fatal(err)
		}
		hl := hclogslog.New(log.With("partition", name, "node", i), "raft")
		trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
			Stream:  layer,
			MaxPool: 3,
			Timeout: 2 * time.Second,
			Logger:  hl,
		})
		if got, want := string(trans.LocalAddr()), m.Addr().String(); got != want {
			t.Errorf("transport LocalAddr: got %q, want the mux address %q", got, want)
		}
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
		if err != nil {
			t.Fatalf("%s node %d: NewRaft: %v", name, i, err)
		}
		t.Cleanup(func() {
			if err := r.Shutdown().Error(); err != nil {
				t.Errorf("%s node %d: Shutdown: %v", name, i, err)
			}
			trans.Close()
		})
		if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
			t.Fatalf("%s node %d: bootstrap: %v", name, i, err)
		}
		reps[i] = replica{raft: r, fsm: f}
	}
	return reps
}

// findLeader waits up to d until one replica leads and every replica knows it, and returns
// that replica, or nil.
func findLeader(reps []replica, d time.Duration) *raft.Raft {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		var leader *raft.Raft
		for _, r := range reps {
			if r.raft.State() == raft.Leader {
				leader = r.raft
			}
		}
		if leader != nil {
			addr, _ := leader.LeaderWithID()
			agree := true
			for _, r := range reps {
				if a, _ := r.raft.LeaderWithID(); a != addr {
					agree = false
				}
			}
			if agree {
				return leader
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// history is what a client knows of the commands it sent to one group: acked committed,
// maybe have an unknown outcome (leadership lost while in flight).
type history struct {
	mu    sync.Mutex
	acked []string
	maybe map[string]bool
}

// apply sends cmd to the group's current leader, retrying while no replica leads or the one
// asked is not the leader (nothing was done then). It records the outcome in h.
func apply(t *testing.T, name string, reps []replica, h *history, cmd string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		leader := findLeader(reps, time.Until(deadline))
		if leader == nil {
			break
		}
		err := leader.Apply([]byte(cmd), 5*time.Second).Error()
		switch {
		case err == nil:
			h.mu.Lock()
			h.acked = append(h.acked, cmd)
			h.mu.Unlock()
			return
		case errors.Is(err, raft.ErrNotLeader):
			continue
		default:
			t.Logf("%s: Apply %q: %v (outcome unknown)", name, cmd, err)
			h.mu.Lock()
			h.maybe[cmd] = true
			h.mu.Unlock()
			return
		}
	}
	t.Errorf("%s: Apply %q: no leader accepted it within 20s", name, cmd)
}

// waitConverged waits until every replica's FSM holds the same commands: every acked one, in
// order, and no command other than h's (no other group's, no duplicate of an acked one).
func waitConverged(t *testing.T, name string, reps []replica, h *history) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	check := func() error {
		first := reps[0].fsm.commands()
		for i, r := range reps[1:] {
			if got := r.fsm.commands(); !slices.Equal(got, first) {
				return fmt.Errorf("node %d has %q, node 0 has %q: want the same", i+1, got, first)
			}
		}
		var acked []string
		for _, c := range first {
			switch {
			case h.maybe[c]:
			case slices.Contains(h.acked, c):
				acked = append(acked, c)
			default:
				return fmt.Errorf("got command %q, which was never sent to %s", c, name)
			}
		}
		if !slices.Equal(acked, h.acked) {
			return fmt.Errorf("got acknowledged commands %q, want %q", acked, h.acked)
		}
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replicas did not converge within 10s: %v", name, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRaftAndRPCOverMux runs two raft groups (partitions) on three muxes, one per node, and
// node-to-node HTTP on the same ports: both groups elect leaders and replicate their own
// commands only, and every node answers RPC from every other while raft traffic flows.
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
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("node %d: Serve: got %v, want http.ErrServerClosed", i, err)
			}
		})
	}

	parts := []string{"trips/1", "trips/2"}
	groups := map[string][]replica{}
	for _, p := range parts {
		groups[p] = startGroup(t, p, muxes)
	}
	hist := map[string]*history{}
	for _, p := range parts {
		hist[p] = &history{maybe: map[string]bool{}}
		// Leadership may move under a loaded -race run: try again if the outcome is unknown.
		for attempt := 0; len(hist[p].acked) == 0 && attempt < 3; attempt++ {
			apply(t, p, groups[p], hist[p], fmt.Sprintf("first %s (attempt %d)", p, attempt))
		}
		if len(hist[p].acked) != 1 {
			t.Fatalf("%s: first command: got %d acknowledged, want 1", p, len(hist[p].acked))
		}
		waitConverged(t, p, groups[p], hist[p])
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
				if err != nil {
					t.Fatal(err)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("node %d -> node %d: %v", i, j, err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				requests++
				want := fmt.Sprintf("node %d got %s from %s:", j, msg, ips[i])
				if resp.StatusCode != http.StatusOK || !bytes.HasPrefix(body, []byte(want)) {
					t.Errorf("node %d -> node %d: got %d %q, want 200 %q...", i, j, resp.StatusCode, body, want)
				}
			}
		}
	}
	// Let raft traffic flow concurrently for a few more entries before stopping it.
	for _, p := range parts {
		deadline := time.Now().Add(10 * time.Second)
		for {
			hist[p].mu.Lock()
			n := len(hist[p].acked)
			hist[p].mu.Unlock()
			if n >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: got %d commands acknowledged in all, want at least 3 within 10s", p, n)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopApplying()
	// Each node keeps one connection per peer: only the first round dials.
	if want := requests - len(muxes)*(len(muxes)-1); reused < want {
		t.Errorf("HTTP keep-alive: got %d of %d requests on a reused connection, want at least %d", reused, requests, want)
	}
	for _, p := range parts {
		waitConverged(t, p, groups[p], hist[p])
	}
}
