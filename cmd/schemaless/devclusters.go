package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/internal/delayproxy"
	"github.com/schemaless-db/schemaless/internal/launcher"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// devClusterNames are the clusters of `dev --clusters 2`, in port order.
var devClusterNames = []string{"east", "west"}

// devClusterPortStep is how far the second cluster's ports are from the first's, and
// devProxyPortStep how far a proxy's port is from the node it leads to.
const (
	devClusterPortStep = 1000
	devProxyPortStep   = 500
)

// devCluster is one cluster of `dev --clusters 2`: its flags, nodes and client.
type devCluster struct {
	name   string
	f      devFlags
	nodes  *launcher.Cluster
	client *client.Client
}

// checkClusters checks the flags of `dev --clusters`.
func (f devFlags) checkClusters() error {
	switch {
	case f.clusters != 2:
		return fmt.Errorf("--clusters %d: want 1 (one cluster) or 2 (east and west, replicating both ways)", f.clusters)
	case f.clusterName != "":
		return errors.New("--cluster-name with --clusters 2: the clusters are named east and west")
	case f.mode != topology.ModeRaft:
		return errors.New("--clusters 2 runs raft datastores: not with --mode async or mixed")
	case f.secure:
		return errors.New("--clusters 2 runs without --secure (set up the replicator role and tokens by hand for TLS peers: docs/operations.md, Two datacenters)")
	case f.mysqlDSN != "":
		return errors.New("--clusters 2 runs on the embedded store: not with --mysql")
	case f.peerDelay < 0 || f.peerDelay > 10*time.Second:
		return fmt.Errorf("--peer-delay %v: want 0 to 10s", f.peerDelay)
	}
	return nil
}

// runDevClusters is `dev --clusters 2`: two clusters, east on the given ports and west 1000
// ports up, each listing the other as its replication peer through TCP proxies that delay each
// direction by --peer-delay.
func runDevClusters(ctx context.Context, f devFlags) error {
	if err := f.checkClusters(); err != nil {
		return err
	}
	if err := f.checkStore(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if f.fresh {
		if err := os.RemoveAll(f.dataDir); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	var cs []*devCluster
	defer func() {
		for _, c := range cs {
			c.nodes.Stop()
		}
	}()
	start := time.Now()
	for i, name := range devClusterNames {
		g := f
		g.clusterName, g.dataDir = name, filepath.Join(f.dataDir, name)
		g.httpPort, g.raftPort = f.httpPort+i*devClusterPortStep, f.raftPort+i*devClusterPortStep
		if f.gossipPort > 0 {
			g.gossipPort = f.gossipPort + i*devClusterPortStep
		}
		if f.adminPort > 0 {
			g.adminPort = f.adminPort + i*devClusterPortStep
		}
		top := g.topology()
		if err := top.Normalize(); err != nil {
			return err
		}
		nodes, err := launcher.New(launcher.Config{Binary: exe, Dir: g.dataDir, Topology: top, Args: g.serveArgs, DieWithParent: true})
		if errors.Is(err, launcher.ErrTopologyChanged) {
			return fmt.Errorf("%s holds a cluster with another topology; pass --fresh to start over, or another --data-dir", g.dataDir)
		}
		if err != nil {
			return err
		}
		if err := nodes.Start(); err != nil {
			return err
		}
		cl, err := client.New(g.clientConfig(nodes.URLs(), "trips"))
		if err != nil {
			return err
		}
		cs = append(cs, &devCluster{name: name, f: g, nodes: nodes, client: cl})
	}
	for _, c := range cs {
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		err := c.nodes.WaitReady(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.name, err)
		}
	}
	// Each cluster reaches the other's nodes through proxies (--peer-delay each way).
	peerEndpoints := map[string][]string{}
	for _, c := range cs {
		for j, u := range c.nodes.URLs() {
			if f.peerDelay == 0 {
				peerEndpoints[c.name] = append(peerEndpoints[c.name], u)
				continue
			}
			target := c.nodes.Topology().Nodes[j].HTTPAddr
			listen := net.JoinHostPort(f.host, strconv.Itoa(c.f.httpPort+devProxyPortStep+j))
			p, err := delayproxy.Start(listen, target, f.peerDelay)
			if err != nil {
				return fmt.Errorf("proxy to %s's node %d: %w", c.name, j+1, err)
			}
			defer p.Close()
			peerEndpoints[c.name] = append(peerEndpoints[c.name], "http://"+p.Addr())
		}
	}
	for i, c := range cs {
		peer := cs[1-i]
		// The catalog may still be electing its leader right after the nodes are ready.
		var err error
		for deadline := time.Now().Add(60 * time.Second); ; {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = c.client.SetReplicationPeer(sctx, peer.name, wire.ReplicationPeerRequest{Endpoints: peerEndpoints[peer.name], Datastores: []string{"trips"}})
			cancel()
			if err == nil || !errors.Is(err, client.ErrUnavailable) || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("cluster %s: set peer %s: %w", c.name, peer.name, err)
		}
	}
	fmt.Printf("ready: 2 clusters in %.1fs, replicating trips both ways, %v each way between them\n", time.Since(start).Seconds(), f.peerDelay)
	for _, c := range cs {
		fmt.Printf("  %s: %d nodes, http %v, data %s; its peer reaches it at %v\n", c.name, f.nodes, c.nodes.URLs(), c.f.dataDir, peerEndpoints[c.name])
	}
	e, w := cs[0].nodes.URLs()[0], cs[1].nodes.URLs()[0]
	fmt.Printf(`try:
  R=$(uuidgen)
  curl -s -X PUT %[1]s/v1/trips/cells/$R/BASE/1 -d '{"city":"SFO"}'
  curl -s %[2]s/v1/trips/cells/$R/BASE/1          # "origin":"east"
  bin/schemaless admin replication --endpoints %[1]s
  bin/schemaless admin replication --endpoints %[2]s --shards
`, e, w)
	if f.importPath != "" {
		res, err := importFlights(ctx, cs[0].client, f.importPath, f.airports, f.importOpts)
		if err != nil {
			return err
		}
		fmt.Printf("imported %d flights into east (%d cells created); they replicate to west\n", res.Flights, res.Created)
	}
	fmt.Println("serving; Ctrl-C to stop")
	exited := make(chan error, len(cs))
	for _, c := range cs {
		go func() { exited <- c.nodes.WaitExit(ctx) }()
	}
	if err := <-exited; err != nil {
		return err
	}
	fmt.Println("stopping")
	return nil
}
