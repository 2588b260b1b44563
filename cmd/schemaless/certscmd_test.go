package main

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/schemaless-db/schemaless/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCertsCommands creates a CA, a node certificate, a client certificate principal, a token
// and a gossip key with `schemaless certs`, and checks that a node loads them and that the
// token authenticates with its role.
func TestCertsCommands(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "certs")
	principals := filepath.Join(dir, "principals.yaml")
	run := func(args ...string) string {
		t.Helper()
		out, errOut, err := runCmd(ctx, append([]string{"certs", "--certs-dir", dir}, args...)...)
		require.NoError(t, err, "certs %v: %s", args, errOut)
		return out
	}
	run("create-ca")
	run("create-node", "n1", "--host", "127.0.0.1", "--host", "node1.example")
	run("create-client", "reporting", "--principals-file", principals, "--role", "read", "--datastore", "trips")
	token := strings.TrimSpace(run("create-token", "app", "--principals-file", principals, "--role", "write"))
	run("create-gossip-key")
	assert.True(t, strings.HasPrefix(token, security.TokenPrefix), token)

	certs, err := security.LoadCerts(security.TLSFiles{CertFile: filepath.Join(dir, "node.n1.crt"), KeyFile: filepath.Join(dir, "node.n1.key"), CAFile: filepath.Join(dir, "ca.crt")}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"node1.example"}, certs.Leaf().DNSNames)
	id, err := security.NodeID(certs.Leaf())
	require.NoError(t, err)
	assert.Equal(t, "n1", id)
	auth, err := security.LoadAuthenticator(principals, nil)
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	p, err := auth.Authenticate(r)
	require.NoError(t, err)
	assert.True(t, p.Allows(security.RoleWrite, "trips"))
	assert.False(t, p.Allows(security.RoleAdmin, ""))
	raw, err := os.ReadFile(principals)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), token, "the token itself is stored")
	_, err = security.LoadGossipKeys(filepath.Join(dir, "gossip.key"))
	require.NoError(t, err)

	// Nothing is overwritten, and a bad role is refused before the file changes.
	_, _, err = runCmd(ctx, "certs", "--certs-dir", dir, "create-ca")
	assert.ErrorContains(t, err, "file exists")
	_, _, err = runCmd(ctx, "certs", "--certs-dir", dir, "create-token", "ops", "--principals-file", principals, "--role", "root")
	assert.ErrorContains(t, err, `unknown role "root"`)
	after, err := os.ReadFile(principals)
	require.NoError(t, err)
	assert.Equal(t, raw, after)
}
