package security

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"
)

// NodeFiles name a node's security files; an empty name leaves its part off.
type NodeFiles struct {
	// TLS are the node's certificate, key and CA (LoadCerts); all empty: no TLS.
	TLS TLSFiles
	// PrincipalsFile turns authentication on (LoadAuthenticator).
	PrincipalsFile string
	// GossipKeyFile turns gossip encryption on (LoadGossipKeys).
	GossipKeyFile string
	// AuditLog is a file the audit log is appended to (JSON lines, created with mode 0600);
	// empty: the audit log goes to the node's logger.
	AuditLog string
}

// NodeSecurity is what LoadNode loaded; a nil field is a part that is off.
type NodeSecurity struct {
	Certs      *Certs
	Auth       *Authenticator
	GossipKeys [][]byte
	// Audit is never nil.
	Audit *Auditor

	closeAudit func() error
}

// LoadNode loads the files of files and, for the certificates and the principals file, checks
// them for changes every reload until ctx ends (Certs.Watch, Authenticator.Watch). logger
// receives the reloads' messages and, without files.AuditLog, the audit log. It fails on the
// first file that cannot be read or parsed, or on a reload interval that is not positive. The
// caller calls Close when the node has stopped.
func LoadNode(ctx context.Context, files NodeFiles, reload time.Duration, logger *slog.Logger) (*NodeSecurity, error) {
	if reload <= 0 {
		return nil, fmt.Errorf("security: reload interval %s: must be positive", reload)
	}
	s := &NodeSecurity{Audit: NewAuditor(logger), closeAudit: func() error { return nil }}
	var err error
	if files.TLS != (TLSFiles{}) {
		if s.Certs, err = LoadCerts(files.TLS, logger); err != nil {
			return nil, err
		}
		s.Certs.Watch(ctx, reload)
	}
	if files.PrincipalsFile != "" {
		if s.Auth, err = LoadAuthenticator(files.PrincipalsFile, logger); err != nil {
			return nil, err
		}
		s.Auth.Watch(ctx, reload)
	}
	if files.GossipKeyFile != "" {
		if s.GossipKeys, err = LoadGossipKeys(files.GossipKeyFile); err != nil {
			return nil, err
		}
	}
	if files.AuditLog != "" {
		af, err := os.OpenFile(files.AuditLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("security: audit log: %w", err)
		}
		s.Audit = NewAuditor(slog.New(slog.NewJSONHandler(af, nil)))
		s.closeAudit = af.Close
	}
	return s, nil
}

// Close closes the audit log file, if LoadNode opened one.
func (s *NodeSecurity) Close() error { return s.closeAudit() }

// The kinds of listener Unprotected knows, and what each needs on an address other hosts can
// reach.
const (
	// ListenerAPI is the client API or the admin listener: TLS and authentication.
	ListenerAPI = "api"
	// ListenerPeer is the node port (raft and node RPC): mutual TLS.
	ListenerPeer = "peer"
	// ListenerGossip is the gossip port: the gossip key.
	ListenerGossip = "gossip"
)

// The protections Unprotected reports missing.
const (
	// NeedTLS: no certificate, key and CA (NodeFiles.TLS).
	NeedTLS = "tls"
	// NeedAuth: no principals file (NodeFiles.PrincipalsFile).
	NeedAuth = "auth"
	// NeedGossipKey: no gossip key (NodeFiles.GossipKeyFile).
	NeedGossipKey = "gossip-key"
)

// Unprotected returns what a listener of kind (ListenerAPI, ListenerPeer, ListenerGossip)
// on addr lacks in s to be reachable from other hosts: NeedTLS, NeedAuth or NeedGossipKey, in
// that order. A listener on a loopback address (IsLoopback) or on no address lacks nothing.
func (s *NodeSecurity) Unprotected(kind, addr string) []string {
	if addr == "" || IsLoopback(addr) {
		return nil
	}
	var missing []string
	if kind != ListenerGossip && s.Certs == nil {
		missing = append(missing, NeedTLS)
	}
	if kind == ListenerAPI && s.Auth == nil {
		missing = append(missing, NeedAuth)
	}
	if kind == ListenerGossip && s.GossipKeys == nil {
		missing = append(missing, NeedGossipKey)
	}
	return missing
}

// IsLoopback reports whether a listen address's host (addr as host:port, or a bare host) is a
// loopback IP or "localhost". An empty host, an unspecified address (0.0.0.0, ::) and any other
// name count as reachable from other hosts.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
