package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/topology"
)

// TestMain makes the test binary its own `schemaless serve` when started as one (first
// argument "serve"): fakeServe.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(fakeServe(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// fakeServe is a stand-in for `schemaless serve`: it reads its node's HTTP address from the
// topology, prints a line, and answers 200 to every request until SIGTERM (exit 0). --exit N
// exits at once with status N; --ignore-term ignores SIGTERM.
func fakeServe(args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	config := fs.String("config", "", "")
	id := fs.String("node-id", "", "")
	fs.String("data-dir", "", "")
	for _, f := range []string{"tls-cert", "tls-key", "tls-ca", "principals-file", "gossip-key-file"} {
		fs.String(f, "", "")
	}
	exit := fs.Int("exit", -1, "")
	ignoreTerm := fs.Bool("ignore-term", false, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Printf("fake serve %s\n", *id)
	if *exit >= 0 {
		return *exit
	}
	top, err := topology.Load(*config)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	spec, ok := top.Node(*id)
	if !ok {
		fmt.Println("no node", *id)
		return 2
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		go func() {
			<-term
			fmt.Printf("fake serve %s: SIGTERM\n", *id)
			os.Exit(0)
		}()
	}
	err = http.ListenAndServe(spec.HTTPAddr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	fmt.Println(err)
	return 1
}

// testTopology is n nodes on free loopback ports and one raft datastore of 2 partitions. Every
// port's listener stays open until all are chosen, so that no two nodes get the same port.
func testTopology(t *testing.T, n int) *topology.Topology {
	top := &topology.Topology{Datastores: []topology.DatastoreSpec{{Name: "trips", Shards: 8, PartitionCount: 2}}}
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		held = append(held, ln)
		return ln.Addr().String()
	}
	for i := range n {
		top.Nodes = append(top.Nodes, topology.NodeSpec{ID: fmt.Sprintf("n%d", i+1), HTTPAddr: addr(), RaftAddr: addr()})
	}
	return top
}

// testConfig is a cluster of this test binary's fake serve.
func testConfig(t *testing.T, top *topology.Topology) Config {
	exe, err := os.Executable()
	require.NoError(t, err)
	return Config{Binary: exe, Dir: t.TempDir(), Topology: top, DieWithParent: true, StopTimeout: 5 * time.Second}
}

// procState is the state letter of /proc/<pid>/stat: R, S, T (stopped), Z...
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), ") ")
	require.True(t, ok, "/proc/%d/stat: %q", pid, b)
	return rest[:1]
}

func TestNewWritesTopologyAndArgs(t *testing.T) {
	t.Parallel()
	top := testTopology(t, 3)
	cfg := testConfig(t, top)
	cfg.Args = func(i int, id string) []string { return []string{"--log-level", fmt.Sprintf("debug-%d-%s", i, id)} }
	c, err := New(cfg)
	require.NoError(t, err)
	assert.FileExists(t, c.TopologyPath())
	got, err := topology.Load(c.TopologyPath())
	require.NoError(t, err, "the written topology loads")
	assert.Equal(t, got, c.Topology(), "Topology: want the file's, defaults filled in")
	ds, ok := c.Topology().Datastore("trips")
	require.True(t, ok)
	assert.Len(t, ds.Partitions, 2, "partitions filled from partition_count")
	assert.Zero(t, top.Datastores[0].Partitions, "the given topology is not modified")
	require.Len(t, c.Nodes, 3)
	for i, n := range c.Nodes {
		assert.Equal(t, "http://"+top.Nodes[i].HTTPAddr, n.URL(), "%s URL", n.ID)
		want := []string{"serve", "--config", c.TopologyPath(), "--node-id", n.ID, "--data-dir", cfg.Dir + "/" + n.ID, "--log-level", fmt.Sprintf("debug-%d-%s", i, n.ID)}
		assert.Equal(t, want, n.Args(), "%s args", n.ID)
		assert.Equal(t, cfg.Dir+"/"+n.ID+".log", n.LogPath, "%s log", n.ID)
		assert.False(t, n.Running(), "%s: New starts nothing", n.ID)
	}
	assert.Equal(t, []string{c.Nodes[0].URL(), c.Nodes[1].URL(), c.Nodes[2].URL()}, c.URLs())
	assert.Nil(t, c.Security(), "no bundle without Secure")

	_, err = New(cfg)
	assert.NoError(t, err, "the same topology again")
	other := *top
	other.Datastores = []topology.DatastoreSpec{{Name: "trips", Shards: 16, PartitionCount: 2}}
	cfg.Topology = &other
	_, err = New(cfg)
	assert.ErrorIs(t, err, ErrTopologyChanged, "another topology in the same directory")
}

func TestNewSecure(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testTopology(t, 2))
	cfg.Secure = true
	cfg.Args = func(int, string) []string { return []string{"--tls-ca", "override.crt"} }
	c, err := New(cfg)
	require.NoError(t, err)
	b := c.Security()
	require.NotNil(t, b, "bundle")
	assert.DirExists(t, cfg.Dir+"/certs")
	for _, n := range c.Nodes {
		assert.True(t, strings.HasPrefix(n.URL(), "https://"), "%s URL %s: want https", n.ID, n.URL())
		args := n.Args()
		for flag, want := range map[string]string{"--tls-cert": b.Node(n.ID).CertFile, "--tls-key": b.Node(n.ID).KeyFile,
			"--principals-file": b.Principals, "--gossip-key-file": b.GossipKey} {
			i := slices.Index(args, flag)
			if assert.GreaterOrEqual(t, i, 0, "%s args %v: want %s", n.ID, args, flag) {
				assert.Equal(t, want, args[i+1], "%s %s", n.ID, flag)
				assert.FileExists(t, want)
			}
		}
		assert.Equal(t, []string{"--tls-ca", "override.crt"}, args[len(args)-2:], "%s: Args come last, so they win", n.ID)
	}
}

// A cluster starts, is ready, survives a kill and a restart of one node (appending to its
// log), a pause and a resume, and stops with SIGTERM.
func TestClusterLifecycle(t *testing.T) {
	t.Parallel()
	c, err := New(testConfig(t, testTopology(t, 3)))
	require.NoError(t, err)
	require.NoError(t, c.CheckAddrs(), "the addresses are free")
	require.NoError(t, c.Start())
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.WaitReady(ctx))
	assert.Error(t, c.CheckAddrs(), "the nodes listen on their HTTP addresses")
	assert.Error(t, c.Nodes[0].Start(), "starting a running node")

	n2 := c.Node("n2")
	require.NotNil(t, n2)
	first := n2.Process()
	require.NoError(t, n2.Kill())
	assert.False(t, n2.Running(), "killed")
	var ee *exec.ExitError
	require.ErrorAs(t, first.Err(), &ee, "a killed process's exit")
	assert.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal(), "killed by SIGKILL")
	require.NoError(t, n2.Start(), "restart")
	assert.NotEqual(t, first.Pid(), n2.Process().Pid(), "a new process")
	require.NoError(t, c.WaitReady(ctx), "ready again after the restart")
	log, err := os.ReadFile(n2.LogPath)
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "fake serve n2\n"), "the log of both processes: %s", log)

	n1 := c.Node("n1")
	require.NoError(t, n1.Pause())
	assert.True(t, n1.Paused())
	pid := n1.Process().Pid()
	require.Eventually(t, func() bool { return procState(t, pid) == "T" }, 5*time.Second, 10*time.Millisecond, "paused: stopped by SIGSTOP")
	require.NoError(t, n1.Resume())
	assert.False(t, n1.Paused())
	require.Eventually(t, func() bool { return procState(t, pid) != "T" }, 5*time.Second, 10*time.Millisecond, "resumed")

	// A paused node is resumed by Stop, and every node exits on SIGTERM.
	require.NoError(t, n1.Pause())
	c.Stop()
	for _, n := range c.Nodes {
		assert.False(t, n.Running(), "%s after Stop", n.ID)
		assert.NoError(t, n.Process().Err(), "%s: exit status 0 on SIGTERM", n.ID)
	}
}

// WaitReady fails as soon as a node's process exits, naming the node, its exit and its log.
func TestWaitReadyNodeExits(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testTopology(t, 3))
	cfg.Args = func(_ int, id string) []string {
		if id == "n3" {
			return []string{"--exit", "3"}
		}
		return nil
	}
	c, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.WaitReady(ctx)
	var xe *ExitError
	require.ErrorAs(t, err, &xe, "WaitReady with n3 exiting")
	assert.Equal(t, "n3", xe.Node)
	assert.Equal(t, c.Node("n3").LogPath, xe.LogPath)
	assert.EqualError(t, err, "node n3 exited (exit status 3); see "+xe.LogPath)
	assert.NoError(t, ctx.Err(), "failed before the deadline")
}

// WaitReady gives up with ctx, naming the node and the last probe's error.
func TestWaitReadyDeadline(t *testing.T) {
	t.Parallel()
	c, err := New(testConfig(t, testTopology(t, 1)))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	require.NoError(t, c.Node("n1").Pause()) // it never answers
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err = c.WaitReady(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorContains(t, err, "node n1 not ready")
}

// WaitExit returns nil when ctx ends, and an *ExitError when a node dies.
func TestWaitExit(t *testing.T) {
	t.Parallel()
	c, err := New(testConfig(t, testTopology(t, 2)))
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(c.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	assert.NoError(t, c.WaitExit(ctx), "nobody exits")

	errc := make(chan error, 1)
	go func() { errc <- c.WaitExit(context.Background()) }()
	require.NoError(t, c.Node("n2").Kill())
	select {
	case err := <-errc:
		var xe *ExitError
		require.ErrorAs(t, err, &xe)
		assert.Equal(t, "n2", xe.Node)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitExit did not return after n2 was killed")
	}
}

// Terminate kills a process that ignores SIGTERM after StopTimeout and says so.
func TestTerminateStubborn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t, testTopology(t, 1))
	cfg.StopTimeout = 300 * time.Millisecond
	cfg.Args = func(int, string) []string { return []string{"--ignore-term"} }
	c, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Start())
	t.Cleanup(c.Stop)
	n := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, c.WaitReady(ctx), "ready: SIGTERM is ignored from now on")
	err = n.Terminate()
	assert.ErrorIs(t, err, ErrNotExited)
	assert.ErrorContains(t, err, "killed")
	assert.False(t, n.Running(), "killed after the SIGTERM was ignored")
	assert.NoError(t, n.Terminate(), "terminating an exited node")
	assert.NoError(t, n.Kill(), "killing an exited node")
}

// Start fails for a binary that does not exist, naming it.
func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	_, err := Start(Command{Name: "ghost", Binary: "/nonexistent/" + strconv.Itoa(os.Getpid()), LogPath: t.TempDir() + "/ghost.log"})
	assert.ErrorContains(t, err, "launcher: start ghost")
	assert.False(t, errors.Is(err, ErrNotExited))
}
