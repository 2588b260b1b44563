package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/jepsen"
	"github.com/spf13/cobra"
)

// newJepsenTriggerWorkerCmd is `schemaless jepsen trigger-worker`, hidden: one trigger worker
// process of the jepsen harness's triggers workload, which the harness starts, kills (kill -9)
// and pauses (SIGSTOP). It delivers the cells of --column as member --worker of --group and
// appends one JSON line per delivery to --out, fsync'ed before the handler returns. SIGTERM or
// SIGINT makes it commit, leave the group and exit 0. Against a secure cluster the harness passes
// the root command's --ca-cert and --token-file.
func newJepsenTriggerWorkerCmd() *cobra.Command {
	var cfg jepsen.TriggerWorkerConfig
	var logs logFlags
	cmd := &cobra.Command{
		Use:    "trigger-worker",
		Short:  "One trigger worker of the harness's triggers workload (started by the harness)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := logs.logger(os.Stderr)
			if err != nil {
				return err
			}
			cfg.Logger = logger
			var auth client.Config // --ca-cert, --token-file (a secure cluster's)
			if err := applyClientAuth(cmd.Context(), &auth); err != nil {
				return err
			}
			cfg.TLS, cfg.Token = auth.TLS, auth.Token
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return jepsen.RunTriggerWorker(ctx, cfg)
		},
	}
	logs.register(cmd)
	fl := cmd.Flags()
	fl.StringSliceVar(&cfg.Endpoints, "endpoints", nil, "nodes' HTTP base URLs, the preferred one first (comma-separated)")
	fl.StringVar(&cfg.Datastore, "datastore", "trig", "datastore")
	fl.StringVar(&cfg.Group, "group", "jepsen", "consumer group")
	fl.StringVar(&cfg.Worker, "worker", "", "member id in the group")
	fl.StringVar(&cfg.Column, "column", "EV", "column key delivered")
	fl.IntVar(&cfg.Shards, "shards", 8, "shard count of the datastore")
	fl.StringVar(&cfg.Out, "out", "", "delivery file (appended)")
	fl.DurationVar(&cfg.SessionTimeout, "session-timeout", 3*time.Second, "group session timeout")
	fl.DurationVar(&cfg.PollWait, "poll-wait", 500*time.Millisecond, "long poll of the shard logs")
	fl.IntVar(&cfg.BatchSize, "batch-size", 100, "cells read per shard per poll")
	fl.DurationVar(&cfg.RequestTimeout, "request-timeout", time.Second, "time limit of one HTTP attempt")
	return cmd
}
