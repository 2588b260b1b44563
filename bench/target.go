package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/fsm"
	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/storage"
)

// A Target is a system the workloads drive: a cluster serving the HTTP API (the external one,
// or one this process starts), or the mysql baseline's bare database.
type Target interface {
	// Name is the target's --target or --baseline value, and its rows' target column
	// (baseline-mysql for the mysql baseline).
	Name() string
	// Endpoints returns the HTTP base URLs of the target's nodes (the caller must not modify
	// the slice), nil for a target without the HTTP API (baseline-mysql).
	Endpoints() []string
	// Close stops what the target started and drops the databases it created. Call it once,
	// when the target's workloads are done.
	Close() error
}

// Values of --target.
const (
	targetExternal    = "external"
	targetSQLite      = "sqlite"
	targetPebble      = "pebble"
	targetMySQL       = "mysql"
	targetRaftNoop    = "raft-noop"
	targetAsync       = "async"
	targetAsyncUnsafe = "async-unsafe"
	// secureSuffix makes a secure variant of sqlite, pebble, mysql and raft-noop (sqlite-secure, ...):
	// the same cluster with TLS on every port, the principals file and the gossip key, as
	// `schemaless dev --secure` runs its nodes (localcluster.Options.Secure), and clients on
	// https that trust its CA and send the app principal's token (write role).
	secureSuffix = "-secure"
)

// clusterTarget is a target serving the HTTP API: the external cluster, or a 3-node cluster
// started in this process (package localcluster).
type clusterTarget struct {
	name      string
	endpoints []string
	// auth is what the clients present: https and a token on the secure variants.
	auth clientAuth
	// async is set for the async targets.
	async *asyncEnv
	// stop stops the target (not the servers of the run's replicatedServers, which Run stops
	// at the end).
	stop func()
}

var (
	_ Target = (*clusterTarget)(nil)
	_ Target = (*mysqlBaseline)(nil)
)

func (t *clusterTarget) Name() string        { return t.name }
func (t *clusterTarget) Endpoints() []string { return t.endpoints }
func (t *clusterTarget) Close() error        { t.stop(); return nil }

// storesCells reports whether t keeps the cells written (raft-noop's state machine does not).
func storesCells(t Target) bool { return strings.TrimSuffix(t.Name(), secureSuffix) != targetRaftNoop }

// clientAuth is what a target's clients present: https trusting tls's CAs and a bearer token
// on a secure target; the zero value is plain http without a token.
type clientAuth struct {
	tls   *tls.Config
	token string
}

// targetAuth returns what t's clients present (the zero clientAuth for all but the secure
// targets).
func targetAuth(t Target) clientAuth {
	if ct, ok := t.(*clusterTarget); ok {
		return ct.auth
	}
	return clientAuth{}
}

// isSecure reports whether t is a secure variant (sqlite-secure, ...).
func isSecure(t Target) bool { return strings.HasSuffix(t.Name(), secureSuffix) }

// startTarget starts target (the async targets on the run's replicated servers, starting them
// if needed). The in-process targets run the index maintainers beside their nodes when a
// workload of env's needs them.
func startTarget(ctx context.Context, target string, env *Env) (*clusterTarget, error) {
	f := env.Config
	if target == targetExternal {
		return &clusterTarget{name: target, endpoints: f.Endpoints, stop: func() {}}, nil
	}
	dir, err := os.MkdirTemp("", "schemaless-bench-")
	if err != nil {
		return nil, err
	}
	opts := localcluster.Options{Dir: dir, Shards: f.Shards, Partitions: f.Partitions, Partition: partition.DefaultConfig()}
	opts.API.RequestTimeout = requestTimeout
	opts.Partition.MaxInflight = f.MaxInflight
	opts.Partition.LogStore = f.RaftLogStore
	opts.OnFatal = func(node string, err error) { fmt.Fprintf(env.Stderr, "bench: node %s: fatal: %v\n", node, err) }
	repl := &env.run.repl
	var prefix, asyncPrefix string
	base, secure := strings.CutSuffix(target, secureSuffix)
	if secure && base != targetSQLite && base != targetPebble && base != targetMySQL && base != targetRaftNoop {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("--target %q: only sqlite, pebble, mysql and raft-noop have a %s variant", target, secureSuffix)
	}
	opts.Secure = secure
	switch base {
	case targetSQLite:
	case targetPebble:
		opts.Store = storage.EnginePebble
	case targetMySQL:
		prefix = fmt.Sprintf("bench%06d", rand.N(1000000))
		opts.MySQLDSN, opts.MySQLPrefix = f.MySQLDSN, prefix
	case targetRaftNoop:
		opts.Partition.NewStateMachine = func(context.Context) (partition.StateMachine, error) { return fsm.NewNoop(), nil }
	case targetAsync, targetAsyncUnsafe:
		set, err := repl.get(ctx, env.Stderr)
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("--target %s: %w", target, err)
		}
		asyncPrefix = fmt.Sprintf("bench%06d", rand.N(1000000))
		opts.Async = asyncOptions(set, asyncPrefix, target == targetAsyncUnsafe)
	default:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("--target %q: want external, sqlite, pebble, mysql, raft-noop, async, async-unsafe, sqlite-secure, pebble-secure, mysql-secure or raft-noop-secure", target)
	}
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		if asyncPrefix != "" {
			repl.drop(asyncPrefix, env.Stderr)
		}
		return nil, fmt.Errorf("start %s cluster: %w", target, err)
	}
	var aenv *asyncEnv
	if opts.Async != nil {
		aenv = newAsyncEnv(repl.set, c, opts.Async)
	}
	var auth clientAuth
	if b := c.Security(); b != nil {
		if auth.tls, err = security.ClientTLS(b.CA, "", ""); err != nil {
			_ = c.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("start %s cluster: %w", target, err)
		}
		auth.token = b.Tokens["app"]
	}
	stopMaintainers := func() {}
	if base != targetRaftNoop && slices.ContainsFunc(f.Workloads, needsMaintainers) {
		if stopMaintainers, err = startMaintainers(ctx, c, f.Index, env.Stderr); err != nil {
			_ = c.Close()
			os.RemoveAll(dir)
			if asyncPrefix != "" {
				repl.drop(asyncPrefix, env.Stderr)
			}
			return nil, fmt.Errorf("start %s index maintainers: %w", target, err)
		}
	}
	return &clusterTarget{name: target, endpoints: c.URLs(), auth: auth, async: aenv, stop: func() {
		stopMaintainers()
		if aenv != nil {
			aenv.close()
		}
		_ = c.Close()
		os.RemoveAll(dir)
		if prefix != "" {
			if err := storage.DropMySQLPrefix(context.Background(), f.MySQLDSN, prefix); err != nil {
				fmt.Fprintf(env.Stderr, "bench: drop databases %s_*: %v\n", prefix, fmt.Errorf("--mysql: %w", err))
			}
		}
		if asyncPrefix != "" {
			repl.drop(asyncPrefix, env.Stderr)
		}
	}}, nil
}

// requestTimeout bounds one request of the benchmark's clients and, on the in-process targets,
// the nodes' handling of it (api.Config.RequestTimeout, 10 s by default). A slow answer is
// measured, not cut and retried: a loaded machine can take longer than 10 s for a put_cells of
// 500.
const requestTimeout = time.Minute

// newClient returns a client of the datastore "trips" on endpoints for clients concurrent
// requests, keeping one idle keep-alive connection per request in flight.
func newClient(endpoints []string, clients int) (*client.Client, error) {
	return newClientConns(endpoints, clients, 0, clientAuth{})
}

// newClientConns is newClient with at most conns HTTP connections per node, shared by the
// clients (requests wait for a free one; conns 0 is newClient's one per client), presenting
// auth. It speaks HTTP/1.1, over TLS too (client.NewTransport).
func newClientConns(endpoints []string, clients, conns int, auth clientAuth) (*client.Client, error) {
	t := client.NewTransport(auth.tls)
	t.MaxIdleConnsPerHost = clients + 16
	t.MaxIdleConns = 3*clients + 64
	if conns > 0 {
		t.MaxConnsPerHost = conns
		t.MaxIdleConnsPerHost = conns
		t.MaxIdleConns = len(endpoints) * conns
	}
	cfg := client.DefaultConfig()
	cfg.Endpoints = endpoints
	cfg.Datastore = "trips"
	cfg.HTTPClient = &http.Client{Transport: t}
	cfg.Token = auth.token
	cfg.RequestTimeout = requestTimeout
	return client.New(cfg)
}
