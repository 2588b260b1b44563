package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
)

// autoGets finds what a --raft-log-store usage says auto gives a new replica: "auto (..., a new
// one gets X)" or "auto (a new replica gets X)".
var autoGets = regexp.MustCompile(`\bauto \([^)]*\bnew (?:one|replica) gets ([a-z]+)\)`)

// TestRaftLogStoreHelp checks that the --raft-log-store help of serve and bench names, for a new
// replica under auto, the format package partition gives it (partition.AutoLogStoreForNewReplica,
// which partition's TestAutoLogStore ties to the files a new replica gets), that their default
// is partition's, and that dev's names serve's default.
func TestRaftLogStoreHelp(t *testing.T) {
	t.Parallel()
	def := partition.DefaultConfig().LogStore
	require.Equal(t, partition.LogStoreAuto, def, "partition's default log store")
	for name, cmd := range map[string]*cobra.Command{"serve": newServeCmd(), "bench": newBenchCmd()} {
		f := cmd.Flags().Lookup("raft-log-store")
		require.NotNil(t, f, "%s has --raft-log-store", name)
		assert.Equal(t, def, f.DefValue, "%s --raft-log-store default", name)
		m := autoGets.FindStringSubmatch(f.Usage)
		if assert.NotNil(t, m, "%s --raft-log-store help %q: want it to say what auto gives a new replica (\"auto (... a new one gets X)\")", name, f.Usage) {
			assert.Equal(t, partition.AutoLogStoreForNewReplica, m[1], "%s --raft-log-store help: auto gives a new replica %s, the help says %s", name, partition.AutoLogStoreForNewReplica, m[1])
		}
		for _, k := range []string{partition.LogStoreNode, partition.LogStoreWAL, partition.LogStoreBolt} {
			assert.Contains(t, f.Usage, k, "%s --raft-log-store help names every format", name)
		}
	}
	f := newDevCmd().Flags().Lookup("raft-log-store")
	require.NotNil(t, f, "dev has --raft-log-store")
	assert.Contains(t, f.Usage, "(default serve's, "+def+")", "dev --raft-log-store help names serve's default")
}

// TestAutoGetsPattern shows the help check failing on a help text that names another format.
func TestAutoGetsPattern(t *testing.T) {
	t.Parallel()
	m := autoGets.FindStringSubmatch("raft log format: auto (a replica keeps the format its directory holds, a new one gets node), node (...)")
	require.NotNil(t, m)
	assert.Equal(t, "node", m[1])
	assert.NotEqual(t, partition.AutoLogStoreForNewReplica, m[1], "a help text saying node would fail TestRaftLogStoreHelp")
	assert.Nil(t, autoGets.FindStringSubmatch("auto or node (the node's shared pebble log), wal or bolt"), "a help text that does not say what auto gives fails it too")
}

// TestFlagHelpValueNames checks every flag of every command for back quotes in its help:
// pflag prints a back-quoted word of the help as the flag's value name ("--tls-cert schemaless
// certs create-node" instead of "--tls-cert string").
func TestFlagHelpValueNames(t *testing.T) {
	t.Parallel()
	var walk func(*cobra.Command)
	checked := 0
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				checked++
				assert.NotContains(t, f.Usage, "`", "%s --%s: a back quote in the help makes pflag print its words as the value name", c.CommandPath(), f.Name)
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	require.Greater(t, checked, 200, "flags checked")
	serve := newServeCmd()
	usages := serve.Flags().FlagUsages()
	for _, flag := range []string{"--tls-cert string", "--principals-file string", "--gossip-key-file string"} {
		assert.Contains(t, usages, flag, "serve --help")
	}
	assert.False(t, strings.Contains(usages, "--tls-cert schemaless"), "serve --help: %s", usages)
}

// TestMaxInflightPerPrincipalHelp checks that the help says what api counts requests by: the
// authenticated principal when a principals file is in use, the client's IP address otherwise.
func TestMaxInflightPerPrincipalHelp(t *testing.T) {
	t.Parallel()
	f := newServeCmd().Flags().Lookup("max-inflight-per-principal")
	require.NotNil(t, f)
	assert.Contains(t, f.Usage, "authenticated principal")
	assert.Contains(t, f.Usage, "else its IP address")
}

// TestStoreFlagsHelp checks the store flags of serve, dev and jepsen: --store defaults to pebble
// everywhere and its help names the values each accepts; serve's help says where pebble keeps
// its data and that an existing SQLite store is migrated (and where its files go); the
// --pebble-* defaults are storage's, and their help states the bounds serve checks.
func TestStoreFlagsHelp(t *testing.T) {
	t.Parallel()
	serve := newServeCmd().Flags()
	f := serve.Lookup("store")
	require.NotNil(t, f, "serve has --store")
	assert.Equal(t, storage.EnginePebble, f.DefValue, "serve --store default")
	for _, want := range []string{"pebble (", "sqlite (", "mysql (", "<data-dir>/pebble", "<data-dir>/sqlite is migrated", "<data-dir>/sqlite.migrated", "--mysql"} {
		assert.Contains(t, f.Usage, want, "serve --store help")
	}
	assert.Contains(t, serve.Lookup("mysql").Usage, "implies --store mysql", "serve --mysql help")
	for name, def := range map[string]int{"pebble-cache-mib": storage.DefaultPebbleCacheMiB, "pebble-memtable-mib": storage.DefaultPebbleMemTableMiB} {
		f := serve.Lookup(name)
		if assert.NotNil(t, f, "serve has --%s", name) {
			assert.Equal(t, strconv.Itoa(def), f.DefValue, "serve --%s default: storage's", name)
			assert.Contains(t, f.Usage, "in MiB", "serve --%s help: the unit", name)
		}
	}
	assert.Contains(t, serve.Lookup("pebble-cache-mib").Usage, "(at least 8)")
	assert.Contains(t, serve.Lookup("pebble-memtable-mib").Usage, "(4 to 1024)")

	f = newDevCmd().Flags().Lookup("store")
	require.NotNil(t, f, "dev has --store")
	assert.Equal(t, storage.EnginePebble, f.DefValue, "dev --store default")
	assert.Contains(t, f.Usage, "pebble (", "dev --store help")
	assert.Contains(t, f.Usage, "or sqlite", "dev --store help")

	f = newJepsenCmd().Flags().Lookup("store")
	require.NotNil(t, f, "jepsen has --store")
	assert.Equal(t, storage.EnginePebble, f.DefValue, "jepsen --store default")
	assert.Contains(t, f.Usage, "pebble, sqlite or mysql", "jepsen --store help")
}
