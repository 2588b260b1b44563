package jepsen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
)

func testClusterConfig(t *testing.T, secure bool) ClusterConfig {
	return ClusterConfig{Binary: "schemaless", Dir: t.TempDir(), Nodes: 3, FirstIP: "127.0.0.2", HTTPPort: 17070, RaftPort: 17170,
		ServeArgs: []string{"--election-timeout", "500ms"}, Secure: secure}
}

// flagValue returns the value following flag in args, failing the test when flag is absent.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	require.GreaterOrEqual(t, i, 0, "args %v: want %s", args, flag)
	require.Less(t, i+1, len(args), "args %v: %s without a value", args, flag)
	return args[i+1]
}

// A secure cluster starts its nodes with the bundle's TLS, principals and gossip key files,
// addresses them over https, and its clients trust the CA (which signed each node's
// certificate for the node's IP) and send the admin token; the trigger workers get the CA and
// the token file by flags.
func TestSecureClusterWiring(t *testing.T) {
	t.Parallel()
	c, err := newCluster(testClusterConfig(t, true))
	require.NoError(t, err)
	require.True(t, c.Secure(), "secure")
	b := c.Security()
	require.NotNil(t, b, "bundle")

	cc := c.ClientConfig()
	require.NotNil(t, cc.TLS, "client TLS")
	require.NotNil(t, cc.TLS.RootCAs, "client TLS roots")
	require.NotEmpty(t, cc.Token, "client token")
	assert.Equal(t, b.Tokens[ClientToken], cc.Token, "client token: want the admin token")

	for _, n := range c.Nodes {
		assert.True(t, strings.HasPrefix(n.URL(), "https://"), "%s URL %s: want https", n.ID, n.URL())
		args := n.Args()
		cert := flagValue(t, args, "--tls-cert")
		assert.Equal(t, b.Node(n.ID).CertFile, cert, "%s --tls-cert", n.ID)
		assert.Equal(t, b.Node(n.ID).KeyFile, flagValue(t, args, "--tls-key"), "%s --tls-key", n.ID)
		assert.Equal(t, b.CA, flagValue(t, args, "--tls-ca"), "%s --tls-ca", n.ID)
		assert.Equal(t, b.Principals, flagValue(t, args, "--principals-file"), "%s --principals-file", n.ID)
		assert.Equal(t, b.GossipKey, flagValue(t, args, "--gossip-key-file"), "%s --gossip-key-file", n.ID)
		assert.Equal(t, "500ms", flagValue(t, args, "--election-timeout"), "%s: the extra serve args kept", n.ID)
		for _, f := range []string{cert, b.Node(n.ID).KeyFile, b.CA, b.Principals, b.GossipKey} {
			assert.FileExists(t, f)
		}

		raw, err := os.ReadFile(cert)
		require.NoError(t, err)
		block, _ := pem.Decode(raw)
		require.NotNil(t, block, "%s: no PEM block in %s", n.ID, cert)
		leaf, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		for _, host := range []string{n.IP, "localhost"} {
			_, err = leaf.Verify(x509.VerifyOptions{Roots: cc.TLS.RootCAs, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			assert.NoError(t, err, "%s's certificate for host %s, verified with the clients' roots", n.ID, host)
		}
	}

	tp := &TriggerProcs{cfg: TriggerProcsConfig{Binary: "schemaless", Dir: t.TempDir(), Count: 1, Endpoints: []string{c.Nodes[0].URL()},
		Datastore: "trig", Group: "g", Column: "EV", Shards: 8, CAFile: c.CAFile(), TokenFile: c.TokenFile()}}
	args := tp.args(&triggerProc{name: "w1", member: "w1-1"}, "out.jsonl")
	assert.Equal(t, b.CA, flagValue(t, args, "--ca-cert"), "trigger worker --ca-cert")
	tok, err := os.ReadFile(flagValue(t, args, "--token-file"))
	require.NoError(t, err, "trigger worker --token-file")
	assert.Equal(t, cc.Token, strings.TrimSpace(string(tok)), "trigger worker token")
	assert.Contains(t, flagValue(t, args, "--endpoints"), "https://", "trigger worker endpoints")
}

// The clients of a secure cluster complete a TLS handshake with a server holding a node's
// certificate, at the node's address, and send the token: the package client's (workers,
// checkers, status) and the membership nemeses' shared http.Client.
func TestSecureClusterHandshake(t *testing.T) {
	t.Parallel()
	c, err := newCluster(testClusterConfig(t, true))
	require.NoError(t, err)
	n := c.Nodes[1]
	files := c.Security().Node(n.ID)
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	require.NoError(t, err)
	want := "Bearer " + c.ClientConfig().Token
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			http.Error(w, `{"error":"unauthenticated"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"node_id":"n2"}`))
	}))
	ln, err := net.Listen("tcp", net.JoinHostPort(n.IP, "0"))
	require.NoError(t, err)
	srv.Listener = ln
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "https://"+n.IP+":"), "server URL %s", srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for name, hc := range map[string]*http.Client{"own transport": nil, "membership's http.Client": c.HTTPClient()} {
		cfg := c.ClientConfig()
		cfg.Endpoints, cfg.MaxAttempts, cfg.HTTPClient = []string{srv.URL}, 1, hc
		cl, err := client.New(cfg)
		require.NoError(t, err, name)
		_, err = cl.Cluster(ctx)
		assert.NoError(t, err, "%s: GET /v1/cluster over TLS with the token", name)
	}

	// Without the cluster's config the server is not trusted.
	plain := client.DefaultConfig()
	plain.Endpoints, plain.MaxAttempts = []string{srv.URL}, 1
	cl, err := client.New(plain)
	require.NoError(t, err)
	_, err = cl.Cluster(ctx)
	assert.Error(t, err, "a client without the CA: want a certificate error")
}

// A cluster without Secure keeps plain HTTP: no security flags, no TLS, no token.
func TestInsecureClusterWiring(t *testing.T) {
	t.Parallel()
	c, err := newCluster(testClusterConfig(t, false))
	require.NoError(t, err)
	assert.False(t, c.Secure(), "secure")
	assert.Nil(t, c.Security(), "bundle")
	cc := c.ClientConfig()
	assert.Nil(t, cc.TLS, "client TLS")
	assert.Empty(t, cc.Token, "client token")
	assert.Empty(t, c.CAFile(), "CA file")
	assert.Empty(t, c.TokenFile(), "token file")
	for _, n := range c.Nodes {
		assert.True(t, strings.HasPrefix(n.URL(), "http://"), "%s URL %s: want http", n.ID, n.URL())
		for _, f := range []string{"--tls-cert", "--tls-key", "--tls-ca", "--principals-file", "--gossip-key-file"} {
			assert.NotContains(t, n.Args(), f, "%s serve args", n.ID)
		}
	}
}

// The printed report says whether security was on.
func TestSummaryPrintSecurity(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		var out strings.Builder
		(&Summary{Secure: secure, Valid: true}).Print(&out)
		want := "security: off"
		if secure {
			want = "security: on"
		}
		assert.Contains(t, out.String(), want, "secure %v", secure)
	}
}
