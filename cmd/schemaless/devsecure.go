package main

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
)

// ensureDevSecurity makes <dataDir>/certs the cluster's development bundle: a CA, a node
// certificate per node for the hosts of its addresses, a gossip key and a token per
// security.DevPrincipals entry (admin, app, reader, prometheus).
func ensureDevSecurity(dataDir string, top *topology.Topology) (*security.DevBundle, error) {
	hosts := map[string][]string{}
	for _, n := range top.Nodes {
		seen := map[string]bool{}
		for _, a := range []string{n.HTTPAddr, n.RaftAddr, n.GossipAddr} {
			if h, _, err := net.SplitHostPort(a); err == nil && !seen[h] {
				seen[h] = true
				hosts[n.ID] = append(hosts[n.ID], h)
			}
		}
		hosts[n.ID] = append(hosts[n.ID], "localhost")
	}
	return security.EnsureDevBundle(filepath.Join(dataDir, "certs"), hosts)
}

// secureServeArgs are serve's security flags for node id under --secure (none without it).
func (f devFlags) secureServeArgs(id string) []string {
	if f.sec == nil {
		return nil
	}
	t := f.sec.Node(id)
	return []string{"--tls-cert", t.CertFile, "--tls-key", t.KeyFile, "--tls-ca", t.CAFile,
		"--principals-file", f.sec.Principals, "--gossip-key-file", f.sec.GossipKey}
}

// scheme is the nodes' API scheme.
func (f devFlags) scheme() string {
	if f.sec != nil {
		return "https"
	}
	return "http"
}

// clientConfig is the config of dev's own clients: under --secure they trust the bundle's CA
// and send the admin token (dev defines the index and the schema).
func (f devFlags) clientConfig(endpoints []string, ds string) client.Config {
	cfg := client.Config{Endpoints: endpoints, Datastore: ds}
	if f.sec != nil {
		tc, err := security.ClientTLS(f.sec.CA, "", "")
		if err == nil {
			cfg.TLS = tc
		}
		cfg.Token = f.sec.Tokens["admin"]
	}
	return cfg
}

// printSecureCurls prints the banner's examples under --secure: curl with the bundle's CA and
// tokens, and what each role is refused.
func printSecureCurls(endpoints []string, b *security.DevBundle) {
	ep := endpoints[0]
	row := "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	ca := b.CA
	tok := func(name string) string { return filepath.Join(b.Dir, "token."+name) }
	fmt.Printf(`
secure: TLS with CA %[3]s (mutual TLS between nodes), tokens in %[4]s, encrypted gossip
try:
  curl -s --cacert %[3]s -H "Authorization: Bearer $(cat %[5]s)" -X PUT %[1]s/v1/trips/cells/%[2]s/BASE/1 -d '{"date":"2001-01-01T08:00:00","origin":"SFO","destination":"JFK","distance":2586,"delay":0}'
  curl -s --cacert %[3]s -H "Authorization: Bearer $(cat %[6]s)" %[1]s/v1/trips/cells/%[2]s/BASE      # read role: ok
  curl -s --cacert %[3]s -H "Authorization: Bearer $(cat %[6]s)" -X PUT %[1]s/v1/trips/cells/%[2]s/BASE/2 -d '{}'   # 403 forbidden
  curl -s --cacert %[3]s %[1]s/v1/trips/cells/%[2]s/BASE                                          # 401 unauthenticated
  curl -s --cacert %[3]s -H "Authorization: Bearer $(cat %[7]s)" %[1]s/v1/admin/partitions        # admin role
  curl -s --cacert %[3]s -H "Authorization: Bearer $(cat %[8]s)" %[1]s/metrics | head              # metrics role
  curl -s http://%[9]s/healthz                                                                     # plaintext: refused
  bin/schemaless --ca-cert %[3]s --token-file %[7]s admin partitions --endpoints %[10]s
`, ep, row, ca, b.Dir, tok("app"), tok("reader"), tok("admin"), tok("prometheus"), ep[len("https://"):], endpoints[0])
}
