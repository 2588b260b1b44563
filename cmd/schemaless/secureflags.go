package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/spf13/cobra"
)

// securityFlags are serve's TLS, authentication and gossip encryption flags; each overrides
// the topology's security block (topology.SecuritySpec).
type securityFlags struct {
	tlsCert, tlsKey, tlsCA string
	principals             string
	gossipKey              string
	auditLog               string
	insecure               bool
	reload                 time.Duration
}

func (f *securityFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.tlsCert, "tls-cert", "", "this node's certificate (PEM, made by 'schemaless certs create-node'): TLS on the API, the admin listener and the node port (mutual TLS between nodes); with --tls-key and --tls-ca")
	fl.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert (PEM)")
	fl.StringVar(&f.tlsCA, "tls-ca", "", "the CA bundle (PEM) trusted for peers' node certificates and clients' certificates")
	fl.StringVar(&f.principals, "principals-file", "", "the principals file (YAML: hashed bearer tokens and certificate names with their roles, made by 'schemaless certs create-token'): every API request but /healthz and /readyz must authenticate")
	fl.StringVar(&f.gossipKey, "gossip-key-file", "", "the gossip keyring file (base64 keys, one per line, the first encrypting, made by 'schemaless certs create-gossip-key'): gossip is encrypted and authenticated")
	fl.StringVar(&f.auditLog, "audit-log", "", "append the audit log (admin operations and refused requests, JSON lines) to this file (default: the node's log)")
	fl.BoolVar(&f.insecure, "insecure", false, "allow listening on a non-loopback address without TLS, authentication and gossip encryption (anyone who reaches the ports can read, write and administer the cluster)")
	fl.DurationVar(&f.reload, "security-reload-interval", 10*time.Second, "how often the certificate, key, CA and principals files are checked for changes and reloaded")
}

// load reads the files the flags (over spec, the topology's block for this node) name and
// starts their reload (security.LoadNode). ctx ends the reload.
func (f *securityFlags) load(ctx context.Context, spec topology.SecuritySpec, logger *slog.Logger) (*security.NodeSecurity, error) {
	pick := func(flag, top string) string {
		if flag != "" {
			return flag
		}
		return top
	}
	if f.reload <= 0 {
		return nil, fmt.Errorf("--security-reload-interval %s: must be positive", f.reload)
	}
	return security.LoadNode(ctx, security.NodeFiles{
		TLS:            security.TLSFiles{CertFile: pick(f.tlsCert, spec.TLSCert), KeyFile: pick(f.tlsKey, spec.TLSKey), CAFile: pick(f.tlsCA, spec.TLSCA)},
		PrincipalsFile: pick(f.principals, spec.PrincipalsFile), GossipKeyFile: pick(f.gossipKey, spec.GossipKeyFile), AuditLog: f.auditLog,
	}, f.reload, logger)
}

// checkExposure refuses a listener on a non-loopback address without the protections its kind
// needs (security.NodeSecurity.Unprotected), unless insecure is set. listeners maps a flag or
// topology name ("http_addr", "raft_addr", "admin", "gossip") to the address listened on.
func checkExposure(s *security.NodeSecurity, insecure bool, listeners [][2]string) error {
	if insecure {
		return nil
	}
	kinds := map[string]string{"raft_addr": security.ListenerPeer, "gossip": security.ListenerGossip}
	flags := map[string]string{security.NeedTLS: "--tls-cert, --tls-key, --tls-ca", security.NeedAuth: "--principals-file",
		security.NeedGossipKey: "--gossip-key-file"}
	var errs []error
	for _, l := range listeners {
		kind, ok := kinds[l[0]]
		if !ok {
			kind = security.ListenerAPI
		}
		var missing []string
		for _, m := range s.Unprotected(kind, l[1]) {
			missing = append(missing, flags[m])
		}
		if len(missing) > 0 {
			errs = append(errs, fmt.Errorf("refusing to listen on %s (%s), which is not a loopback address, without %s (see docs/operations.md, Security), unless --insecure is given", l[1], l[0], strings.Join(missing, " and ")))
		}
	}
	return errors.Join(errs...)
}

// clientAuthKey is the context key of a root command's credentials flags (persistent on the
// root command: a token and the TLS files of https endpoints), a *client.Credentials: each root
// command has its own, which reaches its commands through their context (applyClientAuth).
type clientAuthKey struct{}

func registerClientAuthFlags(root *cobra.Command) {
	a := &client.Credentials{}
	fl := root.PersistentFlags()
	fl.StringVar(&a.Token, "token", os.Getenv("SCHEMALESS_TOKEN"), "client commands: bearer token sent to the nodes (default $SCHEMALESS_TOKEN)")
	fl.StringVar(&a.TokenFile, "token-file", os.Getenv("SCHEMALESS_TOKEN_FILE"), "client commands: read the bearer token from this file (default $SCHEMALESS_TOKEN_FILE)")
	fl.StringVar(&a.CACert, "ca-cert", os.Getenv("SCHEMALESS_CA_CERT"), "client commands: CA bundle (PEM) trusted for https endpoints (default $SCHEMALESS_CA_CERT, else the system's)")
	fl.StringVar(&a.ClientCert, "client-cert", "", "client commands: client certificate (PEM) to authenticate with, with --client-key")
	fl.StringVar(&a.ClientKey, "client-key", "", "client commands: the private key of --client-cert")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		cmd.SetContext(context.WithValue(cmd.Context(), clientAuthKey{}, a))
	}
}

// applyClientAuth sets cfg's token and TLS from the credentials flags of the command running
// with ctx (none: nothing set). Errors as client.Credentials.Apply's.
func applyClientAuth(ctx context.Context, cfg *client.Config) error {
	if a, ok := ctx.Value(clientAuthKey{}).(*client.Credentials); ok {
		return a.Apply(cfg)
	}
	return nil
}
