package security_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/security"
)

func TestLoadNode(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	none, err := security.LoadNode(ctx, security.NodeFiles{}, time.Second, logger)
	require.NoError(t, err, "no files")
	assert.True(t, none.Certs == nil && none.Auth == nil && none.GossipKeys == nil, "every part off: %+v", none)
	assert.NotNil(t, none.Audit, "the audit log goes to the logger")
	assert.NoError(t, none.Close())

	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := security.LoadNode(ctx, security.NodeFiles{TLS: b.Node("n1"), PrincipalsFile: b.Principals, GossipKeyFile: b.GossipKey, AuditLog: audit},
		time.Second, logger)
	require.NoError(t, err, "every file")
	assert.NotNil(t, s.Certs, "certificates")
	assert.NotNil(t, s.Auth, "principals")
	assert.Len(t, s.GossipKeys, 1, "gossip keys")
	st, err := os.Stat(audit)
	require.NoError(t, err, "the audit log file is created")
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "audit log mode")
	assert.NoError(t, s.Close())

	_, err = security.LoadNode(ctx, security.NodeFiles{PrincipalsFile: filepath.Join(t.TempDir(), "missing.yaml")}, time.Second, logger)
	assert.Error(t, err, "a missing principals file")
	_, err = security.LoadNode(ctx, security.NodeFiles{TLS: security.TLSFiles{CertFile: b.Node("n1").CertFile}}, time.Second, logger)
	assert.Error(t, err, "a certificate without key and CA")
	_, err = security.LoadNode(ctx, security.NodeFiles{}, 0, logger)
	assert.ErrorContains(t, err, "reload interval 0s: must be positive")
}

func TestAddPrincipal(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "principals.yaml")
	_, digest := security.NewToken()
	require.NoError(t, security.AddPrincipal(path, security.PrincipalEntry{Name: "app", TokenSHA256: digest, Roles: []string{"write"}}), "create the file")
	require.NoError(t, security.AddPrincipal(path, security.PrincipalEntry{Name: "reporting", Certificate: true, Roles: []string{"read"}, Datastores: []string{"trips"}}))
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	pf, err := security.ParsePrincipals(raw)
	require.NoError(t, err, "the file parses")
	require.Len(t, pf.Principals, 2)
	assert.Equal(t, "app", pf.Principals[0].Name)
	assert.Equal(t, []string{"trips"}, pf.Principals[1].Datastores)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "principals file mode")

	err = security.AddPrincipal(path, security.PrincipalEntry{Name: "app", Certificate: true, Roles: []string{"read"}})
	assert.ErrorIs(t, err, security.ErrBadPrincipals, "a duplicate name")
	err = security.AddPrincipal(path, security.PrincipalEntry{Name: "x", Certificate: true, Roles: []string{"superuser"}})
	assert.ErrorIs(t, err, security.ErrBadPrincipals, "an unknown role")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, raw, after, "a refused entry leaves the file as it was")
	_, err = os.Stat(path + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist, "no temporary file left")
}

func TestWriteGossipKeyFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gossip.key")
	require.NoError(t, security.WriteGossipKeyFile(path))
	keys, err := security.LoadGossipKeys(path)
	require.NoError(t, err)
	assert.Len(t, keys, 1, "one key")
	assert.Len(t, keys[0], 32, "AES-256")
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	assert.Error(t, security.WriteGossipKeyFile(path), "an existing key file is not replaced")
	again, err := security.LoadGossipKeys(path)
	require.NoError(t, err)
	assert.Equal(t, keys, again, "the key is unchanged")
}

func TestIsLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "127.0.0.5:7070": true, "[::1]:7070": true, "localhost:7070": true, "127.0.0.1": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.5:7070": false, "[::]:7070": false, "db1.example:7070": false,
	} {
		assert.Equal(t, want, security.IsLoopback(addr), addr)
	}
}

func TestUnprotected(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	none, err := security.LoadNode(ctx, security.NodeFiles{}, time.Second, logger)
	require.NoError(t, err)
	all, err := security.LoadNode(ctx, security.NodeFiles{TLS: b.Node("n1"), PrincipalsFile: b.Principals, GossipKeyFile: b.GossipKey}, time.Second, logger)
	require.NoError(t, err)
	tlsOnly, err := security.LoadNode(ctx, security.NodeFiles{TLS: b.Node("n1")}, time.Second, logger)
	require.NoError(t, err)
	for _, tc := range []struct {
		s          *security.NodeSecurity
		kind, addr string
		want       []string
	}{
		{none, security.ListenerAPI, "127.0.0.1:7070", nil},
		{none, security.ListenerAPI, "", nil},
		{none, security.ListenerAPI, "0.0.0.0:7070", []string{security.NeedTLS, security.NeedAuth}},
		{none, security.ListenerPeer, "10.0.0.1:7170", []string{security.NeedTLS}},
		{none, security.ListenerGossip, "10.0.0.1:7270", []string{security.NeedGossipKey}},
		{tlsOnly, security.ListenerAPI, "10.0.0.1:7070", []string{security.NeedAuth}},
		{tlsOnly, security.ListenerPeer, "10.0.0.1:7170", nil},
		{all, security.ListenerAPI, "10.0.0.1:7070", nil},
		{all, security.ListenerGossip, "10.0.0.1:7270", nil},
	} {
		assert.Equal(t, tc.want, tc.s.Unprotected(tc.kind, tc.addr), "%s on %s", tc.kind, tc.addr)
	}
}

func TestCreateAuthority(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "certs")
	a, err := security.CreateAuthority(dir, "test CA", time.Hour)
	require.NoError(t, err)
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the directory is created private")
	loaded, err := security.LoadAuthority(dir)
	require.NoError(t, err)
	assert.Equal(t, a.Cert.Raw, loaded.Cert.Raw, "the saved CA loads back")
	assert.Equal(t, "test CA", loaded.Cert.Subject.CommonName)
	_, err = security.CreateAuthority(dir, "another CA", time.Hour)
	assert.Error(t, err, "a directory holding a CA")
	again, err := security.LoadAuthority(dir)
	require.NoError(t, err)
	assert.Equal(t, a.Cert.Raw, again.Cert.Raw, "the first CA is kept")
}
