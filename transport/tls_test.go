package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/schemaless-db/schemaless/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsMuxes starts two muxes, n1 on 127.0.0.1 and n2 on 127.0.0.2, with mutual TLS from one
// development bundle, and returns them with the bundle.
func tlsMuxes(t *testing.T) (*Mux, *Mux, *security.DevBundle) {
	t.Helper()
	b, err := security.EnsureDevBundle(t.TempDir(), map[string][]string{"n1": {"127.0.0.1"}, "n2": {"127.0.0.2"}})
	require.NoError(t, err)
	withTLS := func(id string) func(*Config) {
		certs, err := security.LoadCerts(b.Node(id), nil)
		require.NoError(t, err)
		return func(c *Config) { c.ServerTLS, c.ClientTLS = certs.PeerServerConfig(), certs.PeerClientConfig() }
	}
	return newMux(t, "127.0.0.1", withTLS("n1")), newMux(t, "127.0.0.2", withTLS("n2")), b
}

// TestTLSPeers carries raft and RPC between two nodes of one CA over mutual TLS.
func TestTLSPeers(t *testing.T) {
	m1, m2, _ := tlsMuxes(t)
	l1, err := m1.RaftLayer("trips/0")
	require.NoError(t, err)
	acc := acceptAsync(l1)
	l2, err := m2.RaftLayer("trips/0")
	require.NoError(t, err)
	c, err := l2.Dial(raft.ServerAddress(m1.Addr().String()), time.Second)
	require.NoError(t, err)
	defer c.Close()
	r := accepted(t, acc, 5*time.Second)
	require.NoError(t, r.err)
	defer r.conn.Close()
	_, err = c.Write([]byte("append"))
	require.NoError(t, err)
	buf := make([]byte, 6)
	_, err = io.ReadFull(r.conn, buf)
	require.NoError(t, err)
	assert.Equal(t, "append", string(buf))

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("pong")) })}
	go func() { _ = srv.Serve(m1.RPCListener()) }()
	defer srv.Close()
	resp, err := m2.HTTPClient(5 * time.Second).Get("http://" + m1.Addr().String() + "/internal/v1/ping")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "pong", string(body))
}

// TestTLSRefusesStrangers is the probe "the raft port accepts a raw raft connection from an
// unknown peer": plaintext, no certificate, a client certificate of the cluster's CA and a node
// certificate of another CA are all refused before the header reaches raft.
func TestTLSRefusesStrangers(t *testing.T) {
	m1, _, b := tlsMuxes(t)
	l1, err := m1.RaftLayer("trips/0")
	require.NoError(t, err)
	acc := acceptAsync(l1)
	addr := m1.Addr().String()

	// A raw raft connection: the header in plaintext.
	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = raw.Write(raftHeader("trips/0"))
	require.NoError(t, err)
	expectClosedByPeer(t, raw, 10*time.Second)
	raw.Close()

	ca, err := security.LoadAuthority(b.Dir)
	require.NoError(t, err)
	client, err := ca.IssueClient("mallory", time.Hour)
	require.NoError(t, err)
	require.NoError(t, client.Save(filepath.Join(b.Dir, "c.crt"), filepath.Join(b.Dir, "c.key")))
	other, err := security.EnsureDevBundle(t.TempDir(), map[string][]string{"n9": {"127.0.0.1"}})
	require.NoError(t, err)
	for _, tc := range []struct{ name, cert, key string }{
		{"no certificate", "", ""},
		{"client certificate of the cluster's CA", filepath.Join(b.Dir, "c.crt"), filepath.Join(b.Dir, "c.key")},
		{"node certificate of another CA", other.Node("n9").CertFile, other.Node("n9").KeyFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := security.ClientTLS(b.CA, tc.cert, tc.key)
			require.NoError(t, err)
			cfg.ServerName = "127.0.0.1"
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
			if err == nil {
				// TLS 1.3: the server's verdict on the client certificate arrives with the
				// first read.
				_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
				_, _ = conn.Write(raftHeader("trips/0"))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
			}
			require.Error(t, err, "the node port took a stranger's connection")
			assert.NotErrorIs(t, err, os.ErrDeadlineExceeded, "the node port kept a stranger's connection open")
		})
	}
	select {
	case r := <-acc:
		t.Fatalf("a stranger's connection reached raft: %v, %v", r.conn, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestTLSDialVerifiesPeer: a node dialing an address held by a node of another CA refuses it.
func TestTLSDialVerifiesPeer(t *testing.T) {
	m1, _, _ := tlsMuxes(t)
	other, err := security.EnsureDevBundle(t.TempDir(), map[string][]string{"n9": {"127.0.0.3"}})
	require.NoError(t, err)
	certs, err := security.LoadCerts(other.Node("n9"), nil)
	require.NoError(t, err)
	imposter := newMux(t, "127.0.0.3", func(c *Config) { c.ServerTLS, c.ClientTLS = certs.PeerServerConfig(), certs.PeerClientConfig() })
	_, err = m1.DialRPC(context.Background(), "tcp", imposter.Addr().String())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TLS handshake")
}
