package jepsen

import (
	"net/http"
	"path/filepath"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
)

// ClientToken names the principal of the development bundle whose token every client of a
// secure run sends: admin, whose role implies every other (the nemeses change raft
// configurations, the index workload defines its index, the workers read and write).
const ClientToken = "admin"

// Secure reports whether the cluster runs with TLS, tokens and gossip encryption.
func (c *Cluster) Secure() bool { return c.sec != nil }

// Security returns the security bundle of a secure cluster, nil otherwise.
func (c *Cluster) Security() *security.DevBundle { return c.sec }

// TokenFile is the file holding the token ClientConfig sends ("" on a cluster without
// security), for the harness's subprocesses (`--token-file`).
func (c *Cluster) TokenFile() string {
	if c.sec == nil {
		return ""
	}
	return filepath.Join(c.sec.Dir, "token."+ClientToken)
}

// CAFile is the CA certificate the clients of a secure cluster trust ("" otherwise), for the
// harness's subprocesses (`--ca-cert`).
func (c *Cluster) CAFile() string {
	if c.sec == nil {
		return ""
	}
	return c.sec.CA
}

// ClientConfig is client.DefaultConfig for this cluster: on a secure cluster it trusts the
// bundle's CA and sends the ClientToken principal's token. Endpoints are left to the caller.
func (c *Cluster) ClientConfig() client.Config {
	cfg := client.DefaultConfig()
	if c.sec != nil {
		cfg.TLS = c.tls.Clone()
		cfg.Token = c.sec.Tokens[ClientToken]
	}
	return cfg
}

// HTTPClient returns a new http.Client for the nodes' API: its transport trusts the bundle's
// CA on a secure cluster. A client.Config with this HTTPClient still needs the token
// (ClientConfig sets it).
func (c *Cluster) HTTPClient() *http.Client {
	return &http.Client{Transport: client.NewTransport(c.tls)}
}
