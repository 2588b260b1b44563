package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/schemaless-db/schemaless/wire"
)

// Replication returns this cluster's name, its peer clusters and the progress of each stream
// (GET /v1/admin/replication; see wire.ReplicationStreamStatus). It needs the admin role.
// Errors: ErrUnavailable, ErrInternal, ErrBadResponse, ctx's error.
func (c *Client) Replication(ctx context.Context) (wire.ReplicationStatus, error) {
	const op = "admin_replication"
	ans, err := c.do(ctx, &request{op: op, method: http.MethodGet, path: "/v1/admin/replication", ok: []int{http.StatusOK}})
	if err != nil {
		return wire.ReplicationStatus{}, err
	}
	var resp wire.ReplicationStatus
	if err := decode(op, ans, &resp); err != nil {
		return wire.ReplicationStatus{}, err
	}
	if resp.Peers == nil {
		resp.Peers = []wire.ReplicationPeerStatus{}
	}
	return resp, nil
}

// SetReplicationPeer lists peer cluster name in this cluster's catalog, or replaces its
// settings (PUT /v1/admin/replication/{peer}): every node then streams the cells written in
// this cluster for req.Datastores to the peer. Setting a peer again with the same settings is
// harmless, so the call is retried like an idempotent admin change. It blocks until the
// answering node applied the change, the attempt runs out of Config.AdminTimeout, or ctx is
// done. Errors: ErrInvalidArgument (a field refused, with Field: peer, endpoints[i],
// datastores[i], token, ca_cert, client_cert; or this cluster has no name, field cluster),
// ErrUnavailable, ErrIndeterminate, ErrInternal, ctx's error.
func (c *Client) SetReplicationPeer(ctx context.Context, name string, req wire.ReplicationPeerRequest) (wire.ReplicationPeerStatus, error) {
	const op = "admin_set_replication_peer"
	if name == "" {
		return wire.ReplicationPeerStatus{}, required(op, "peer", "the peer cluster's name")
	}
	var resp wire.ReplicationPeerStatus
	ans, err := c.adminChange(ctx, op, http.MethodPut, "/v1/admin/replication/"+url.PathEscape(name), req, []AdminOption{AdminIdempotent()}, &resp)
	if err != nil {
		return wire.ReplicationPeerStatus{}, err
	}
	if resp.Peer != name {
		return wire.ReplicationPeerStatus{}, badResponse(op, ans, "peer %q set, want %q", resp.Peer, name)
	}
	return resp, nil
}

// DropReplicationPeer removes peer cluster name from this cluster's catalog (DELETE
// /v1/admin/replication/{peer}): its streams stop on every node; their consumer groups keep
// their offsets, so setting the peer again resumes them. Errors: ErrNotFound (no such peer),
// ErrInvalidArgument, ErrUnavailable, ErrIndeterminate, ErrInternal, ctx's error.
func (c *Client) DropReplicationPeer(ctx context.Context, name string) error {
	const op = "admin_drop_replication_peer"
	if name == "" {
		return required(op, "peer", "the peer cluster's name")
	}
	var resp map[string]string
	_, err := c.adminChange(ctx, op, http.MethodDelete, "/v1/admin/replication/"+url.PathEscape(name), nil, nil, &resp)
	return err
}
