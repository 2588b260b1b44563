package bench

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/schemaless-db/schemaless/internal/localcluster"
	"github.com/schemaless-db/schemaless/maintainer"
)

// startMaintainers runs the index maintainer (package maintainer) beside every node of c over
// every datastore, in-process over the node as `schemaless serve` runs it
// (node.Config.Maintainer): polling the catalog every x.PollInterval, its warnings on stderr
// when x.LogWarnings. The returned function stops them all and waits for them (their workers
// leave their groups).
func startMaintainers(ctx context.Context, c *localcluster.Cluster, x IndexConfig, stderr io.Writer) (func(), error) {
	level := slog.LevelError + 4 // silent
	if x.LogWarnings {
		level = slog.LevelWarn
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	var datastores []string
	for _, d := range c.Topology.Datastores {
		datastores = append(datastores, d.Name)
	}
	if len(datastores) == 0 {
		return func() {}, nil
	}
	mctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, spec := range c.Topology.Nodes {
		cfg := maintainer.Config{Backend: c.Node(i), Datastores: datastores, Worker: spec.ID, PollInterval: x.PollInterval,
			Logger: logger.With("node", spec.ID)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := maintainer.Run(mctx, cfg); err != nil {
				cfg.Logger.Error("index maintainer stopped", "error", err)
			}
		}()
	}
	return func() {
		cancel()
		wg.Wait()
	}, nil
}
