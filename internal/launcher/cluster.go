package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
)

// ErrTopologyChanged: the directory holds the topology file of another cluster.
var ErrTopologyChanged = errors.New("launcher: the directory holds a cluster with another topology")

// Default waits of Node's signals.
const (
	// DefaultStopTimeout is how long Terminate (and Stop) wait for a node to exit after
	// SIGTERM before SIGKILL.
	DefaultStopTimeout = 10 * time.Second
	// killWait is how long Kill waits for a node to exit after SIGKILL.
	killWait = 10 * time.Second
	// readyPoll is the interval of WaitReady's /readyz probes; readyProbeTimeout bounds one.
	readyPoll         = 100 * time.Millisecond
	readyProbeTimeout = time.Second
)

// Config describes the `schemaless serve` processes of a cluster: one per node of Topology.
type Config struct {
	// Binary is the schemaless executable.
	Binary string
	// Dir holds the topology file (topology.yaml), the security bundle (certs/, with Secure)
	// and, per node, its data directory <Dir>/<id> and its log <Dir>/<id>.log. Created if
	// missing.
	Dir string
	// Topology is the cluster, written to <Dir>/topology.yaml as given (serve fills the
	// defaults when it loads it). New does not modify it.
	Topology *topology.Topology
	// Secure makes <Dir>/certs a development bundle (security.EnsureDevBundle: a CA, a
	// certificate per node for the hosts of its addresses and localhost, a gossip key and a
	// token per principal; existing files are kept) and starts every node with TLS on the API
	// and mutual TLS between nodes, the principals file and the gossip key. The nodes' URLs
	// are then https, and WaitReady's probes trust the bundle's CA.
	Secure bool
	// Args returns the flags of the `schemaless serve` of node id, the i-th of the topology
	// (from 0), beyond --config, --node-id, --data-dir and Secure's flags, which come first (a
	// flag given again in Args wins): its store, log format, raft timeouts. Nil: none.
	Args func(i int, id string) []string
	// DieWithParent makes every node die with the launching process (Command.DieWithParent).
	DieWithParent bool
	// StopTimeout is how long Terminate and Stop wait after SIGTERM before SIGKILL; 0 means
	// DefaultStopTimeout.
	StopTimeout time.Duration
}

// Cluster is the processes of a topology's nodes. Its methods are safe for concurrent use.
type Cluster struct {
	// Nodes are the topology's nodes, in its order.
	Nodes []*Node

	cfg      Config
	top      *topology.Topology
	topoPath string
	sec      *security.DevBundle
	probe    *client.Client
}

// Node is one node's process slot: started, signalled and restarted over the same data
// directory and log. Its methods are safe for concurrent use.
type Node struct {
	// ID is the node's id; HTTPAddr and RaftAddr its addresses in the topology.
	ID, HTTPAddr, RaftAddr string
	// DataDir is its --data-dir, <Dir>/<id>; LogPath its log, <Dir>/<id>.log.
	DataDir, LogPath string

	scheme      string
	cmd         Command
	stopTimeout time.Duration

	mu   sync.Mutex
	proc *Process // the current process; nil before the first Start
}

// ExitError reports a node whose process exited while WaitReady or WaitExit watched it.
type ExitError struct {
	Node    string
	Err     error // the exit, as Process.Err
	LogPath string
}

// Error says which node exited, how, and where its log is: "node n1 exited (exit status 1); see
// <dir>/n1.log".
func (e *ExitError) Error() string {
	return fmt.Sprintf("node %s exited (%v); see %s", e.Node, e.Err, e.LogPath)
}

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// New writes the topology file (and, with cfg.Secure, the security bundle) under cfg.Dir and
// returns the cluster with no process started. The file is compared with one already in
// cfg.Dir: a different one is ErrTopologyChanged (the directory holds another cluster's data),
// an identical one is kept.
func New(cfg Config) (*Cluster, error) {
	if cfg.Binary == "" || cfg.Dir == "" || cfg.Topology == nil || len(cfg.Topology.Nodes) == 0 {
		return nil, errors.New("launcher: Config needs Binary, Dir and a Topology with nodes")
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	text, err := yaml.Marshal(cfg.Topology)
	if err != nil {
		return nil, fmt.Errorf("launcher: topology: %w", err)
	}
	top, err := topology.Parse(bytes.NewReader(text))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, top: top, topoPath: filepath.Join(cfg.Dir, "topology.yaml")}
	if old, err := os.ReadFile(c.topoPath); err == nil && !bytes.Equal(old, text) {
		return nil, fmt.Errorf("%w: %s", ErrTopologyChanged, c.topoPath)
	}
	if err := os.WriteFile(c.topoPath, text, 0o644); err != nil {
		return nil, err
	}
	probe := client.DefaultConfig()
	scheme := "http"
	if cfg.Secure {
		if c.sec, err = ensureSecurity(cfg.Dir, top); err != nil {
			return nil, err
		}
		if probe.TLS, err = security.ClientTLS(c.sec.CA, "", ""); err != nil {
			return nil, err
		}
		scheme = "https"
	}
	for i, spec := range top.Nodes {
		n := &Node{ID: spec.ID, HTTPAddr: spec.HTTPAddr, RaftAddr: spec.RaftAddr, scheme: scheme, stopTimeout: cfg.StopTimeout,
			DataDir: filepath.Join(cfg.Dir, spec.ID), LogPath: filepath.Join(cfg.Dir, spec.ID+".log")}
		n.cmd = Command{Name: "node " + spec.ID, Binary: cfg.Binary, Args: c.serveArgs(i, n), LogPath: n.LogPath, DieWithParent: cfg.DieWithParent}
		c.Nodes = append(c.Nodes, n)
		probe.Endpoints = append(probe.Endpoints, n.URL())
	}
	probe.MaxAttempts, probe.RequestTimeout = 1, readyProbeTimeout
	if c.probe, err = client.New(probe); err != nil {
		return nil, err
	}
	return c, nil
}

// ensureSecurity makes <dir>/certs the development bundle of top's nodes: a certificate per
// node for the hosts of its HTTP, raft and gossip addresses, and localhost.
func ensureSecurity(dir string, top *topology.Topology) (*security.DevBundle, error) {
	hosts := map[string][]string{}
	for _, n := range top.Nodes {
		seen := map[string]bool{}
		for _, a := range []string{n.HTTPAddr, n.RaftAddr, n.GossipAddr} {
			if h, _, err := net.SplitHostPort(a); err == nil && !seen[h] {
				seen[h] = true
				hosts[n.ID] = append(hosts[n.ID], h)
			}
		}
		hosts[n.ID] = append(hosts[n.ID], "localhost")
	}
	return security.EnsureDevBundle(filepath.Join(dir, "certs"), hosts)
}

// serveArgs are n's `schemaless serve` arguments.
func (c *Cluster) serveArgs(i int, n *Node) []string {
	args := []string{"serve", "--config", c.topoPath, "--node-id", n.ID, "--data-dir", n.DataDir}
	if c.sec != nil {
		t := c.sec.Node(n.ID)
		args = append(args, "--tls-cert", t.CertFile, "--tls-key", t.KeyFile, "--tls-ca", t.CAFile,
			"--principals-file", c.sec.Principals, "--gossip-key-file", c.sec.GossipKey)
	}
	if c.cfg.Args != nil {
		args = append(args, c.cfg.Args(i, n.ID)...)
	}
	return args
}

// Topology is the cluster's topology with its defaults filled in (topology.Parse of the
// file), as every node loads it.
func (c *Cluster) Topology() *topology.Topology { return c.top }

// TopologyPath is the topology file, <Dir>/topology.yaml.
func (c *Cluster) TopologyPath() string { return c.topoPath }

// Security is the development bundle of a Secure cluster, nil otherwise.
func (c *Cluster) Security() *security.DevBundle { return c.sec }

// URLs are the nodes' API base URLs, in the order of Nodes.
func (c *Cluster) URLs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.URL()
	}
	return out
}

// Node returns the node with id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// CheckAddrs fails, naming the node and the address, when an HTTP or raft address of a node
// cannot be listened on (taken by another process, or not an address of this machine).
func (c *Cluster) CheckAddrs() error {
	for _, n := range c.Nodes {
		for _, addr := range []string{n.HTTPAddr, n.RaftAddr} {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("launcher: %s cannot use %s: %w", n.ID, addr, err)
			}
			ln.Close()
		}
	}
	return nil
}

// Start starts every node's process. It does not wait for readiness (WaitReady). On error the
// processes started are stopped.
func (c *Cluster) Start() error {
	for _, n := range c.Nodes {
		if err := n.Start(); err != nil {
			c.Stop()
			return err
		}
	}
	return nil
}

// WaitReady waits until every datastore of the topology is ready on every node
// (GET /readyz?datastore=NAME answers 200: the partitions a node hosts know their leaders, an
// async datastore's storage clusters have masters), probing every 100 ms. It fails with an
// *ExitError as soon as a node's process has exited, or with ctx's error and the last probe's.
func (c *Cluster) WaitReady(ctx context.Context) error {
	for _, n := range c.Nodes {
		if err := c.waitNodeReady(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, n *Node) error {
	for {
		if err := c.exited(); err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, readyProbeTimeout)
		var err error
		for _, d := range c.top.Datastores {
			if err = c.probe.DatastoreReady(pctx, n.URL(), d.Name); err != nil {
				break
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("launcher: node %s not ready: %w (last: %w)", n.ID, ctx.Err(), err)
		case <-time.After(readyPoll):
		}
	}
}

// exited returns an *ExitError for the first node whose current process has exited.
func (c *Cluster) exited() error {
	for _, n := range c.Nodes {
		if p := n.Process(); p != nil && !p.Running() {
			return &ExitError{Node: n.ID, Err: p.Err(), LogPath: n.LogPath}
		}
	}
	return nil
}

// WaitExit blocks until a node's current process exits, returning an *ExitError naming it,
// or until ctx ends (nil). A node restarted meanwhile is watched in its new process from its
// next start on only; call it when the nodes run.
func (c *Cluster) WaitExit(ctx context.Context) error {
	exits := make(chan error, len(c.Nodes))
	for _, n := range c.Nodes {
		if p := n.Process(); p != nil {
			go func() {
				select {
				case <-p.Done():
					exits <- &ExitError{Node: n.ID, Err: p.Err(), LogPath: n.LogPath}
				case <-ctx.Done():
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-exits:
		return err
	}
}

// Stop resumes and terminates every node at once (Node.Terminate), and returns when all have
// exited.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() {
			_ = n.Resume()
			_ = n.Terminate()
		})
	}
	wg.Wait()
}

// URL is the node's API base URL: http:// or, on a Secure cluster, https:// and its HTTP
// address.
func (n *Node) URL() string { return n.scheme + "://" + n.HTTPAddr }

// Args are the node's `schemaless serve` arguments (a copy).
func (n *Node) Args() []string { return append([]string(nil), n.cmd.Args...) }

// Process is the node's current process (exited or not), nil before the first Start.
func (n *Node) Process() *Process {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Start starts the node's process (again, after an exit), appending to its log. It fails if
// the process runs. It does not wait for readiness.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil && n.proc.Running() {
		return fmt.Errorf("launcher: node %s is already running", n.ID)
	}
	p, err := Start(n.cmd)
	if err != nil {
		return err
	}
	n.proc = p
	return nil
}

// Running reports whether the node's process is alive (a paused one is).
func (n *Node) Running() bool {
	p := n.Process()
	return p != nil && p.Running()
}

// Paused reports whether the node's process is stopped by Pause.
func (n *Node) Paused() bool {
	p := n.Process()
	return p != nil && p.Paused()
}

// Kill sends SIGKILL to the node's process (resuming it first if paused) and waits up to 10 s
// for it to exit. A node not running is left as it is.
func (n *Node) Kill() error {
	if p := n.Process(); p != nil {
		return p.Kill(killWait)
	}
	return nil
}

// Terminate stops the node cleanly (SIGTERM), killing it if it has not exited after
// Config.StopTimeout (Process.Terminate). A node not running is left as it is.
func (n *Node) Terminate() error {
	if p := n.Process(); p != nil {
		return p.Terminate(n.stopTimeout)
	}
	return nil
}

// Pause stops the node's process with SIGSTOP.
func (n *Node) Pause() error {
	if p := n.Process(); p != nil {
		return p.Pause()
	}
	return nil
}

// Resume continues a paused node's process with SIGCONT.
func (n *Node) Resume() error {
	if p := n.Process(); p != nil {
		return p.Resume()
	}
	return nil
}
