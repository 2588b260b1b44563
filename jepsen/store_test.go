package jepsen

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeArgsStore checks the store flags each node's serve gets: --store when
// ClusterConfig.Store is set (none when empty: serve's default), --mysql and a prefix of the
// node's own with a DSN, and ServeArgs last.
func TestServeArgsStore(t *testing.T) {
	t.Parallel()
	cfg := ClusterConfig{Store: "sqlite", ServeArgs: []string{"--election-timeout", "500ms"}}
	args := serveArgs(cfg, "n1")
	assert.Equal(t, "sqlite", flagValue(t, args, "--store"))
	assert.NotContains(t, args, "--mysql")
	assert.Equal(t, []string{"--election-timeout", "500ms"}, args[len(args)-2:], "ServeArgs last")

	cfg.Store = "pebble"
	assert.Equal(t, "pebble", flagValue(t, serveArgs(cfg, "n1"), "--store"))

	cfg.Store = ""
	assert.False(t, slices.Contains(serveArgs(cfg, "n1"), "--store"), "empty Store: serve's default, no --store")

	cfg.Store, cfg.MySQLDSN, cfg.MySQLPrefix = "mysql", "root@tcp(127.0.0.1:3306)/", "jp000001"
	args = serveArgs(cfg, "n2")
	assert.Equal(t, "mysql", flagValue(t, args, "--store"))
	assert.Equal(t, cfg.MySQLDSN, flagValue(t, args, "--mysql"))
	assert.Equal(t, "jp000001_n2", flagValue(t, args, "--mysql-prefix"))
}

// TestConfigStore checks Config.Store: pebble by default; an unknown store, mysql without a
// DSN and a DSN with an embedded store are refused.
func TestConfigStore(t *testing.T) {
	t.Parallel()
	cfg := DefaultConfig()
	assert.Equal(t, "pebble", cfg.Store, "default store")
	require.NoError(t, cfg.Validate(), "DefaultConfig")
	for _, store := range []string{"pebble", "sqlite"} {
		c := cfg
		c.Store = store
		assert.NoError(t, c.Validate(), "store %s", store)
		c.MySQLDSN = "root@tcp(127.0.0.1:3306)/"
		assert.ErrorContains(t, c.Validate(), "jepsen: store "+store+" with a MySQL DSN")
	}
	c := cfg
	c.Store = "mysql"
	assert.ErrorContains(t, c.Validate(), "jepsen: store mysql needs a MySQL DSN")
	c.MySQLDSN = "root@tcp(127.0.0.1:3306)/"
	assert.NoError(t, c.Validate(), "store mysql with a DSN")
	c.Store = "rocksdb"
	assert.ErrorContains(t, c.Validate(), `jepsen: store "rocksdb": want pebble, sqlite or mysql`)
}
