package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/bench"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// benchConfig runs `schemaless bench args` with a run function that only keeps the
// configuration the flags gave, and returns it.
func benchConfig(t *testing.T, args ...string) bench.Config {
	t.Helper()
	var got *bench.Config
	cmd := newBenchCmdRunning(func(_ context.Context, c bench.Config) error {
		got = &c
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	require.NoError(t, cmd.Execute(), "bench %q", args)
	require.NotNil(t, got, "bench %q did not run", args)
	return *got
}

// TestBenchFlagsConfig checks the wiring of `schemaless bench`: without flags the configuration
// is bench.DefaultConfig, and each flag sets its field.
func TestBenchFlagsConfig(t *testing.T) {
	assert.Equal(t, bench.DefaultConfig(), benchConfig(t), "no flags: the defaults")

	c := benchConfig(t, "--target", "raft-noop,sqlite", "--workload", "put,get-latest", "--clients", "1,8", "--client", "go,plain", "--rate", "100,200",
		"--duration", "3s", "--warmup", "0s", "--ops", "7", "--connections", "2", "--baseline", "mysql", "--json",
		"--workers", "2", "--trigger-consistency", "strong", "--index-flights", "500", "--query-where", "delay>0",
		"--reaper-cells", "9", "--trips-mix", "read=100", "--scale-steps", "10,20", "--scale-rate", "2.5", "--scale-file", "f.csv")
	want := bench.DefaultConfig()
	want.Targets, want.Workloads, want.Clients, want.Rates, want.RateSet = []string{"raft-noop", "sqlite"}, []string{"put", "get-latest"}, []int{1, 8}, []int{100, 200}, true
	want.ClientKinds = []string{"go", "plain"}
	want.Duration, want.Warmup, want.Ops, want.Connections, want.Baselines, want.JSON = 3*time.Second, 0, 7, 2, []string{"mysql"}, true
	want.Triggers.Workers, want.Triggers.Consistency = []int{2}, []string{"strong"}
	want.Index.Flights, want.Index.QueryWhere = 500, "delay>0"
	want.Async.ReaperCells = 9
	want.Trips.Mix = "read=100"
	want.Scale.Steps, want.Scale.Rate, want.Scale.File = []int{10, 20}, 2.5, "f.csv"
	assert.Equal(t, want, c)
}

// TestBenchSecureTargetsFlag checks that --target keeps an alternation of a target and its secure
// variant in order, repeats included (the A/B/A/B of issue 19), and that --help documents the
// secure variants.
func TestBenchSecureTargetsFlag(t *testing.T) {
	c := benchConfig(t, "--target", "sqlite,sqlite-secure,sqlite,sqlite-secure")
	assert.Equal(t, []string{"sqlite", "sqlite-secure", "sqlite", "sqlite-secure"}, c.Targets)
	cmd := newBenchCmd()
	for _, name := range []string{"sqlite-secure", "mysql-secure", "raft-noop-secure"} {
		assert.Contains(t, cmd.Long, name, "bench --help: want the %s target described", name)
		assert.Contains(t, cmd.Flags().Lookup("target").Usage, name, "--target usage: want %s listed", name)
	}
}

// TestBenchPlotCommand runs `schemaless bench plot` through the root command: --in repeated and
// comma-separated, and a bad --x refused naming the flag.
func TestBenchPlotCommand(t *testing.T) {
	dir := t.TempDir()
	var in []string
	for i, n := range []int{1, 4, 16} {
		path := filepath.Join(dir, "put-"+string(rune('a'+i))+".jsonl")
		line, err := json.Marshal(bench.Result{Target: "sqlite", Workload: "put", Clients: n, CellsPerSec: float64(100 * n)})
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(line, '\n'), 0o644))
		in = append(in, path)
	}
	run := func(args ...string) error {
		cmd := newRootCmd()
		cmd.SetArgs(append([]string{"bench", "plot"}, args...))
		cmd.SetOut(new(bytes.Buffer))
		cmd.SetErr(new(bytes.Buffer))
		return cmd.Execute()
	}
	out := filepath.Join(dir, "put.svg")
	require.NoError(t, run("--in", in[0]+","+in[1], "--in", in[2], "--x", "clients", "--y", "cells_per_sec", "--out", out))
	svg, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Contains(t, string(svg), ">sqlite put<", "legend of the plot")
	err = run("--in", in[0], "--x", "threads", "--out", filepath.Join(dir, "bad.svg"))
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), `--x "threads"`)
	}
}
