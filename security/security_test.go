package security_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/security"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newBundle creates a development bundle in a temp dir with node n1 on 127.0.0.1.
func newBundle(t *testing.T) *security.DevBundle {
	t.Helper()
	b, err := security.EnsureDevBundle(t.TempDir(), map[string][]string{"n1": {"127.0.0.1", "localhost"}, "n2": {"127.0.0.2"}})
	require.NoError(t, err)
	return b
}

func TestEnsureDevBundleKeepsWhatExists(t *testing.T) {
	b := newBundle(t)
	ca, err := os.ReadFile(b.CA)
	require.NoError(t, err)
	again, err := security.EnsureDevBundle(b.Dir, map[string][]string{"n1": {"127.0.0.1"}, "n3": {"127.0.0.3"}})
	require.NoError(t, err)
	ca2, err := os.ReadFile(again.CA)
	require.NoError(t, err)
	assert.Equal(t, ca, ca2, "the CA was replaced")
	assert.Equal(t, b.Tokens, again.Tokens, "the tokens were replaced")
	_, err = security.LoadCerts(again.Node("n3"), nil)
	assert.NoError(t, err, "the new node's certificate")
	for _, name := range []string{"ca.key", "token.admin", "node.n1.key", "gossip.key", "principals.yaml"} {
		fi, err := os.Stat(filepath.Join(b.Dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "%s mode", name)
	}
}

func TestLoadCertsRefusesAnotherCA(t *testing.T) {
	a, b := newBundle(t), newBundle(t)
	files := a.Node("n1")
	files.CAFile = b.CA
	_, err := security.LoadCerts(files, nil)
	assert.ErrorContains(t, err, "is not signed by a CA of")
	_, err = security.LoadCerts(security.TLSFiles{CertFile: files.CertFile}, nil)
	assert.ErrorContains(t, err, "--tls-key")
}

func TestParsePrincipals(t *testing.T) {
	digest := security.HashToken("x")
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown role", "principals:\n- {name: a, token_sha256: " + digest + ", roles: [root]}\n", `unknown role "root"`},
		{"no role", "principals:\n- {name: a, token_sha256: " + digest + "}\n", "principals[0] (\"a\").roles"},
		{"twice", "principals:\n- {name: a, token_sha256: " + digest + ", roles: [read]}\n- {name: a, certificate: true, roles: [read]}\n", "appears twice"},
		{"token not digest", "principals:\n- {name: a, token_sha256: slt_abc, roles: [read]}\n", "want 64 hex digits"},
		{"same token", "principals:\n- {name: a, token_sha256: " + digest + ", roles: [read]}\n- {name: b, token_sha256: " + digest + ", roles: [read]}\n", "the same token"},
		{"no credential", "principals:\n- {name: a, roles: [read]}\n", "needs a token digest"},
		{"bad name", "principals:\n- {name: 'a b', certificate: true, roles: [read]}\n", ".name"},
		{"unknown field", "principals:\n- {name: a, token: x, roles: [read]}\n", "field token not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := security.ParsePrincipals([]byte(tc.yaml))
			require.ErrorIs(t, err, security.ErrBadPrincipals)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	f, err := security.ParsePrincipals([]byte("principals:\n- {name: a, token_sha256: " + digest + ", roles: [read, metrics], datastores: [trips]}\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"read", "metrics"}, f.Principals[0].Roles)
}

func TestAllows(t *testing.T) {
	p := func(roles []security.Role, ds ...string) *security.Principal {
		return &security.Principal{Name: "p", Roles: roles, Datastores: ds}
	}
	R, W, A, M, X := security.RoleRead, security.RoleWrite, security.RoleAdmin, security.RoleMetrics, security.RoleReplicator
	for _, tc := range []struct {
		p    *security.Principal
		role security.Role
		ds   string
		want bool
	}{
		{nil, security.RoleNone, "", true},
		{nil, R, "trips", false},
		{p([]security.Role{R}), R, "trips", true},
		{p([]security.Role{R}), W, "trips", false},
		{p([]security.Role{W}), R, "trips", true},
		{p([]security.Role{W}), A, "", false},
		{p([]security.Role{W}), M, "", false},
		{p([]security.Role{M}), M, "", true},
		{p([]security.Role{M}), R, "trips", false},
		{p([]security.Role{A}), W, "trips", true},
		{p([]security.Role{A}), M, "", true},
		{p([]security.Role{W}, "rides"), W, "trips", false},
		{p([]security.Role{W}, "rides"), W, "rides", true},
		{p([]security.Role{W}, "rides"), R, "", true},
		{p([]security.Role{A}, "rides"), W, "trips", true},
		{p([]security.Role{X}), W, "trips", true},
		{p([]security.Role{X}), R, "trips", true},
		{p([]security.Role{X}), X, "trips", true},
		{p([]security.Role{X}), A, "", false},
		{p([]security.Role{W}), X, "trips", false},
		{p([]security.Role{A}), X, "trips", true},
		{p([]security.Role{X}, "rides"), X, "trips", false},
	} {
		assert.Equal(t, tc.want, tc.p.Allows(tc.role, tc.ds), "%+v allows %q on %q", tc.p, tc.role, tc.ds)
	}
}

func TestAuthenticateTokens(t *testing.T) {
	b := newBundle(t)
	a, err := security.LoadAuthenticator(b.Principals, nil)
	require.NoError(t, err)
	req := func(h string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/v1/trips/cells/x", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		return r
	}
	p, err := a.Authenticate(req("Bearer " + b.Tokens["app"]))
	require.NoError(t, err)
	assert.Equal(t, "app", p.Name)
	assert.Equal(t, "token", p.Method)
	_, err = a.Authenticate(req(""))
	assert.ErrorIs(t, err, security.ErrNoCredentials)
	_, err = a.Authenticate(req("Bearer " + b.Tokens["app"] + "x"))
	assert.ErrorIs(t, err, security.ErrBadCredentials)
	_, err = a.Authenticate(req("Basic " + b.Tokens["app"]))
	assert.ErrorIs(t, err, security.ErrBadCredentials)
	_, err = a.Authenticate(req(b.Tokens["app"]))
	assert.ErrorIs(t, err, security.ErrBadCredentials)

	// A new token reaches the node with a reload; a broken file leaves the last good one.
	tok, digest := security.NewToken()
	f, err := security.ParsePrincipals(mustRead(t, b.Principals))
	require.NoError(t, err)
	f.Principals = append(f.Principals, security.PrincipalEntry{Name: "late", TokenSHA256: digest, Roles: []string{"read"}})
	data, err := f.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Principals, data, 0o600))
	changed, err := a.Reload()
	require.NoError(t, err)
	assert.True(t, changed)
	p, err = a.Authenticate(req("Bearer " + tok))
	require.NoError(t, err)
	assert.Equal(t, "late", p.Name)
	require.NoError(t, os.WriteFile(b.Principals, []byte("principals: [ {name: x"), 0o600))
	_, err = a.Reload()
	assert.ErrorIs(t, err, security.ErrBadPrincipals)
	_, err = a.Authenticate(req("Bearer " + tok))
	assert.NoError(t, err, "the last good principals stay in force")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestClientCertificates serves an httptest TLS server with the node's ServerConfig and
// authenticates a certificate principal, refusing a node certificate and a certificate of
// another CA.
func TestClientCertificates(t *testing.T) {
	b := newBundle(t)
	ca, err := security.LoadAuthority(b.Dir)
	require.NoError(t, err)
	issued, err := ca.IssueClient("reporting", time.Hour)
	require.NoError(t, err)
	require.NoError(t, issued.Save(filepath.Join(b.Dir, "client.reporting.crt"), filepath.Join(b.Dir, "client.reporting.key")))
	f, err := security.ParsePrincipals(mustRead(t, b.Principals))
	require.NoError(t, err)
	f.Principals = append(f.Principals, security.PrincipalEntry{Name: "reporting", Certificate: true, Roles: []string{"read"}})
	data, err := f.Marshal()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Principals, data, 0o600))
	auth, err := security.LoadAuthenticator(b.Principals, nil)
	require.NoError(t, err)
	certs, err := security.LoadCerts(b.Node("n1"), nil)
	require.NoError(t, err)

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ref := security.Check(auth, r, security.RoleRead, "trips")
		if ref != nil {
			http.Error(w, ref.Message, ref.Status)
			return
		}
		_, _ = w.Write([]byte(p.Name + " " + p.Method))
	}))
	srv.TLS = certs.ServerConfig()
	srv.StartTLS()
	defer srv.Close()
	get := func(certFile, keyFile string) (int, string) {
		tc, err := security.ClientTLS(b.CA, certFile, keyFile)
		require.NoError(t, err)
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := cl.Get(srv.URL)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		buf := make([]byte, 512)
		n, _ := resp.Body.Read(buf)
		return resp.StatusCode, string(buf[:n])
	}
	code, body := get(filepath.Join(b.Dir, "client.reporting.crt"), filepath.Join(b.Dir, "client.reporting.key"))
	assert.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "reporting certificate", body)
	code, body = get(b.Node("n2").CertFile, b.Node("n2").KeyFile)
	assert.Equal(t, http.StatusUnauthorized, code, body)
	assert.Contains(t, body, "not a client certificate")
	code, body = get("", "")
	assert.Equal(t, http.StatusUnauthorized, code, body)
	other := newBundle(t)
	oca, err := security.LoadAuthority(other.Dir)
	require.NoError(t, err)
	foreign, err := oca.IssueClient("reporting", time.Hour)
	require.NoError(t, err)
	require.NoError(t, foreign.Save(filepath.Join(other.Dir, "c.crt"), filepath.Join(other.Dir, "c.key")))
	code, body = get(filepath.Join(other.Dir, "c.crt"), filepath.Join(other.Dir, "c.key"))
	assert.Equal(t, 0, code, "a certificate of another CA must fail the handshake: %s", body)
}

// TestCertsReload rotates a node's certificate on disk and sees new handshakes use it.
func TestCertsReload(t *testing.T) {
	b := newBundle(t)
	certs, err := security.LoadCerts(b.Node("n1"), nil)
	require.NoError(t, err)
	before := certs.Leaf().SerialNumber
	ca, err := security.LoadAuthority(b.Dir)
	require.NoError(t, err)
	is, err := ca.IssueNode("n1", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Node("n1").CertFile, is.CertPEM, 0o644))
	require.NoError(t, os.WriteFile(b.Node("n1").KeyFile, is.KeyPEM, 0o600))
	block, _ := pem.Decode(is.CertPEM)
	require.NotNil(t, block, "the issued certificate's PEM")
	issued, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.NotEqual(t, before, issued.SerialNumber, "a new certificate has a new serial number")
	changed, err := certs.Reload()
	require.NoError(t, err)
	assert.True(t, changed)
	assert.Equal(t, issued.SerialNumber, certs.Leaf().SerialNumber, "the certificate was not reloaded")
	cfg, err := certs.ServerConfig().GetConfigForClient(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	require.Len(t, cfg.Certificates, 1, "the server's certificates")
	assert.Equal(t, issued.Raw, cfg.Certificates[0].Leaf.Raw, "handshakes use the reloaded certificate")
	// A key that does not match leaves the last good pair in force.
	other, err := ca.IssueNode("n1", []string{"127.0.0.1"}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(b.Node("n1").KeyFile, other.KeyPEM, 0o600))
	_, err = certs.Reload()
	assert.Error(t, err, "a key that does not match the certificate")
	assert.Equal(t, issued.SerialNumber, certs.Leaf().SerialNumber, "the last good certificate stays in force")
}

func TestGossipKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gossip.key")
	require.NoError(t, os.WriteFile(path, []byte("# keyring\n"+security.NewGossipKey()+"\n\n"+security.NewGossipKey()+"\n"), 0o600))
	keys, err := security.LoadGossipKeys(path)
	require.NoError(t, err)
	assert.Len(t, keys, 2)
	assert.Len(t, keys[0], 32)
	require.NoError(t, os.WriteFile(path, []byte("c2hvcnQ=\n"), 0o600))
	_, err = security.LoadGossipKeys(path)
	assert.ErrorContains(t, err, "want 16, 24 or 32")
	require.NoError(t, os.WriteFile(path, []byte("\n"), 0o600))
	_, err = security.LoadGossipKeys(path)
	assert.ErrorContains(t, err, "holds no key")
}
