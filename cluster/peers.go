package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// Limits of a peer cluster's settings (SetPeer).
const (
	// MaxPeerEndpoints bounds a peer's endpoints, MaxPeerDatastores its datastores.
	MaxPeerEndpoints  = 16
	MaxPeerDatastores = 64
	// MaxPeerTokenBytes bounds a peer's bearer token.
	MaxPeerTokenBytes = 4096
)

// Peer is a peer cluster as the catalog holds it (replication between clusters): its name and
// the settings it was given (secrets included: never show them).
type Peer struct {
	Name string
	wire.ReplicationPeerRequest
}

// ClusterName returns this node's cluster name (Config.ClusterName), "" when it has none.
func (n *Node) ClusterName() string { return n.cfg.ClusterName }

// Peers returns the peer clusters of the catalog as this node holds it, by name, and the
// catalog's generation. A peer whose settings do not decode is left out (and logged).
func (n *Node) Peers() ([]Peer, uint64) {
	c := n.cat.cur.Load()
	if c == nil {
		return nil, 0
	}
	var out []Peer
	for _, name := range c.PeerNames() {
		var req wire.ReplicationPeerRequest
		if err := json.Unmarshal(c.Peers[name], &req); err != nil {
			n.log.Error("replication: peer settings do not decode", "peer", name, "err", err)
			continue
		}
		out = append(out, Peer{Name: name, ReplicationPeerRequest: req})
	}
	return out, c.Generation
}

// SetPeer adds peer cluster name, or replaces its settings, through the catalog (OpSetPeer),
// and returns once this node applied the change and the catalog's generation. Every node's
// replicator then runs the peer's streams. Errors: *FieldError (this cluster has no name, the
// peer is this cluster, an endpoint, datastore or credential refused), ErrNoCatalog,
// ErrIndeterminate, ctx's error.
func (n *Node) SetPeer(ctx context.Context, name string, req wire.ReplicationPeerRequest) (uint64, error) {
	c := n.cat.cur.Load()
	if c == nil {
		return 0, ErrNoCatalog
	}
	if err := n.checkPeer(c, name, req); err != nil {
		return 0, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return 0, err
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSetPeer, Peer: name, Settings: b})
	if errors.Is(err, catalog.ErrBadCommand) {
		return 0, &FieldError{Field: "peer", Msg: err.Error()}
	}
	if err != nil {
		return 0, err
	}
	n.log.Info("replication peer set", "peer", name, "endpoints", req.Endpoints, "datastores", req.Datastores, "generation", res.Generation)
	return res.Generation, nil
}

// DropPeer removes peer cluster name from the catalog: every node's replicator stops its
// streams (their consumer groups and offsets stay, so setting the peer again resumes where
// they stopped). Errors: ErrUnknownPeer, ErrNoCatalog, ErrIndeterminate, ctx's error.
func (n *Node) DropPeer(ctx context.Context, name string) (uint64, error) {
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpSetPeer, Peer: name})
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return 0, fmt.Errorf("%w: %q", ErrUnknownPeer, name)
	case errors.Is(err, catalog.ErrBadCommand):
		return 0, &FieldError{Field: "peer", Msg: err.Error()}
	case err != nil:
		return 0, err
	}
	n.log.Info("replication peer dropped", "peer", name, "generation", res.Generation)
	return res.Generation, nil
}

// ErrUnknownPeer: DropPeer of a peer the catalog does not list.
var ErrUnknownPeer = errors.New("cluster: no such replication peer")

// checkPeerCommand checks an OpSetPeer command on the catalog's leader, as any internal RPC's
// input is: settings that decode and pass checkPeer (removals pass).
func (n *Node) checkPeerCommand(cmd catalog.Command) error {
	if len(cmd.Settings) == 0 {
		return nil
	}
	var req wire.ReplicationPeerRequest
	dec := json.NewDecoder(strings.NewReader(string(cmd.Settings)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("settings of peer %s: %w", cmd.Peer, err)
	}
	c := n.cat.cur.Load()
	if c == nil {
		return ErrNoCatalog
	}
	return n.checkPeer(c, cmd.Peer, req)
}

// checkPeer checks peer settings against catalog c: the names, the endpoints (URLs with
// http or https, or host:port), the datastores (each in c), the credentials (a token of
// printable ASCII, PEMs that parse, a client certificate with its key).
func (n *Node) checkPeer(c *catalog.Catalog, name string, req wire.ReplicationPeerRequest) error {
	if n.cfg.ClusterName == "" {
		return &FieldError{Field: "cluster", Msg: "this cluster has no name: start its nodes with --cluster-name (or cluster_name in the topology) before it replicates"}
	}
	if err := cells.ValidateClusterName("peer", name); err != nil {
		return &FieldError{Field: "peer", Msg: fmt.Sprintf("%q must be 1 to %d bytes of [a-z0-9-], starting with a letter", name, cells.MaxClusterNameLen)}
	}
	if name == n.cfg.ClusterName {
		return &FieldError{Field: "peer", Msg: fmt.Sprintf("%q is this cluster's own name: two clusters that replicate need different names", name)}
	}
	if len(req.Endpoints) == 0 || len(req.Endpoints) > MaxPeerEndpoints {
		return &FieldError{Field: "endpoints", Msg: fmt.Sprintf("give 1 to %d endpoints of the peer's API, got %d", MaxPeerEndpoints, len(req.Endpoints))}
	}
	for i, e := range req.Endpoints {
		if err := checkEndpoint(e); err != nil {
			return &FieldError{Field: fmt.Sprintf("endpoints[%d]", i), Msg: err.Error()}
		}
	}
	if len(req.Datastores) == 0 || len(req.Datastores) > MaxPeerDatastores {
		return &FieldError{Field: "datastores", Msg: fmt.Sprintf("give 1 to %d datastores, got %d", MaxPeerDatastores, len(req.Datastores))}
	}
	for i, ds := range req.Datastores {
		if c.Datastores[ds] == nil {
			return &FieldError{Field: fmt.Sprintf("datastores[%d]", i), Msg: fmt.Sprintf("no datastore %q in this cluster", ds)}
		}
		if slices.Index(req.Datastores, ds) != i {
			return &FieldError{Field: fmt.Sprintf("datastores[%d]", i), Msg: fmt.Sprintf("%q is listed twice", ds)}
		}
	}
	if len(req.Token) > MaxPeerTokenBytes || strings.IndexFunc(req.Token, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return &FieldError{Field: "token", Msg: fmt.Sprintf("at most %d bytes of printable ASCII without spaces", MaxPeerTokenBytes)}
	}
	if req.CACert != "" {
		if !x509.NewCertPool().AppendCertsFromPEM([]byte(req.CACert)) {
			return &FieldError{Field: "ca_cert", Msg: "no PEM certificate in it"}
		}
	}
	if (req.ClientCert == "") != (req.ClientKey == "") {
		return &FieldError{Field: "client_cert", Msg: "give client_cert and client_key together"}
	}
	if req.ClientCert != "" {
		if _, err := tls.X509KeyPair([]byte(req.ClientCert), []byte(req.ClientKey)); err != nil {
			return &FieldError{Field: "client_cert", Msg: err.Error()}
		}
	}
	return nil
}

// checkEndpoint checks one endpoint: an http or https URL with a host and no path beyond
// "/", or host:port.
func checkEndpoint(e string) error {
	if len(e) > 512 {
		return fmt.Errorf("%d bytes, at most 512", len(e))
	}
	if !strings.Contains(e, "://") {
		if _, port, err := net.SplitHostPort(e); err != nil || port == "" {
			return fmt.Errorf("%q is neither a URL nor host:port", e)
		}
		return nil
	}
	u, err := url.Parse(e)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q: want http(s)://host:port with no path, query or user", e)
	}
	return nil
}
