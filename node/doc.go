// Package node composes one running node of a cluster: the cluster node, the HTTP API on its
// listener, the index maintainer, the metrics and the admin listener.
//
//	n, err := node.Start(ctx, cfg) // cfg from flags (cmd), or from a test harness
//	...
//	select {
//	case <-ctx.Done():
//		err = n.Shutdown(context.Background()) // graceful
//	case err = <-n.Failed(): // a fatal store failure, or the API's server failed
//		n.Close()
//	}
//
// `schemaless serve`, the in-process clusters of internal/localcluster and the test clusters
// of internal/clustertest all build their nodes with Start. The caller opens and closes the
// store, and passes in the logger and the Prometheus registry; RegisterProcessMetrics adds the
// process-wide series once per process.
//
// # Start and stop
//
// Start opens the cluster node (its replicas, transport and gossip), registers the node's
// metrics, starts the admin listener (Config.AdminAddr: /metrics and net/http/pprof), serves
// the API (with GET /metrics beside it when Config.Registry is set), and finally starts the
// index maintainer (Config.Maintainer), whose workers read the shard logs and commit their
// offsets through the cluster node in-process (maintainer.Source), not over HTTP.
//
// Shutdown is the graceful stop, in this order: the maintainer's workers commit and leave
// their groups (so their shards move to other nodes at once), the partitions this node leads
// are handed to other replicas, the API finishes its requests in flight, then the admin
// listener and the cluster node stop. Close is the abrupt stop (a crash, as the peers see it;
// the maintainer still leaves its groups first).
//
// # Fatal store failures
//
// A store that keeps failing stops a replica from applying (cluster.Config.OnFatal). The node
// then reports ErrFatal on Failed and keeps its listeners open until the caller stops it; the
// caller must stop it, so that a restart replays the raft log, rather than serve from a
// replica that may have diverged.
package node
