package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeRefusesExposedListeners: serve on a non-loopback address without TLS, principals
// and a gossip key stops before listening, naming what is missing; --insecure lets it start.
func TestServeRefusesExposedListeners(t *testing.T) {
	base := freePortRange(t, 3)
	dir := t.TempDir()
	topo := filepath.Join(dir, "topology.yaml")
	require.NoError(t, os.WriteFile(topo, []byte(fmt.Sprintf(`nodes:
  - {id: n1, raft_addr: "127.0.0.1:%d", http_addr: "0.0.0.0:%d", gossip_addr: "127.0.0.1:%d"}
datastores:
  - {name: users, shards: 4, partition_count: 1}
`, base, base+1, base+2)), 0o644))
	args := []string{"serve", "--config", topo, "--node-id", "n1", "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn", "--gossip-bind", "0.0.0.0:" + strconv.Itoa(base+2)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := runCmd(ctx, args...)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "refusing to listen on 0.0.0.0:"+strconv.Itoa(base+1)+" (http_addr)")
	assert.Contains(t, err.Error(), "--principals-file")
	assert.Contains(t, err.Error(), "(gossip), which is not a loopback address, without --gossip-key-file")
	assert.NotContains(t, err.Error(), "(raft_addr)", "the raft port is on loopback")

	// With TLS and principals but no gossip key, only gossip is refused.
	b, err := security.EnsureDevBundle(filepath.Join(dir, "certs"), map[string][]string{"n1": {"127.0.0.1"}})
	require.NoError(t, err)
	f := b.Node("n1")
	_, _, err = runCmd(ctx, append(args, "--tls-cert", f.CertFile, "--tls-key", f.KeyFile, "--tls-ca", f.CAFile, "--principals-file", b.Principals)...)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "(http_addr)")
	assert.Contains(t, err.Error(), "(gossip)")

	// --insecure starts it (stopped by the context).
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer scancel()
	_, errOut, err := runCmd(sctx, append(args, "--insecure")...)
	assert.NoError(t, err, errOut)
}
