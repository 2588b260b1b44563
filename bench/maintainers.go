package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/indexes/maintainer"
	"github.com/schemaless-db/schemaless/internal/localcluster"
)

// startMaintainers runs the index maintainer (package indexes/maintainer) beside every node of
// c over every datastore, as `schemaless serve` does: each with a client that reaches its own
// node first, then the others, polling the catalog every x.PollInterval, its warnings on stderr
// when x.LogWarnings. The returned function stops them all and waits for them.
func startMaintainers(ctx context.Context, c *localcluster.Cluster, x IndexConfig, stderr io.Writer) (func(), error) {
	level := slog.LevelError + 4 // silent
	if x.LogWarnings {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var stops []func()
	stopAll := func() {
		for _, s := range stops {
			s()
		}
	}
	for i, spec := range c.Topology.Nodes {
		endpoints := []string{c.URL(i)}
		for j := range c.Topology.Nodes {
			if j != i {
				endpoints = append(endpoints, c.URL(j))
			}
		}
		ccfg := client.DefaultConfig()
		ccfg.Endpoints = endpoints
		cl, err := client.New(ccfg)
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("index maintainer: %w", err)
		}
		cfg := maintainer.Config{Backend: c.Node(i), Client: cl, Worker: spec.ID, PollInterval: x.PollInterval, Logger: logger.With("node", spec.ID)}
		for _, d := range c.Topology.Datastores {
			cfg.Datastores = append(cfg.Datastores, d.Name)
		}
		if len(cfg.Datastores) == 0 {
			continue
		}
		mctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := maintainer.Run(mctx, cfg); err != nil {
				cfg.Logger.Error("index maintainer stopped", "error", err)
			}
		}()
		stops = append(stops, func() {
			cancel()
			<-done
		})
	}
	return stopAll, nil
}
