package main

import (
	"fmt"
	"path/filepath"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
)

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
