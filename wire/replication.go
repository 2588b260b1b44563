package wire

import "time"

// ReplicationPeerRequest is the body of PUT /v1/admin/replication/{peer}: where the peer
// cluster's API listens and which datastores this cluster sends it. Each cluster names the
// other on its own side; together they replicate both ways.
//
//   - Endpoints: 1 to 16 base URLs of the peer's nodes ("https://10.0.0.5:7070", or host:port
//     for http); the replicator's client spreads over them and fails over.
//   - Datastores: 1 to 64 datastores this cluster holds, each with the same name and shard
//     count in the peer. Only cells written in this cluster are sent (Cell.Origin empty).
//   - Token: the bearer token of a principal with the replicator role in the peer (at most
//     4,096 bytes); CACert: the PEM of the CA that signed the peer's certificate; ClientCert
//     and ClientKey: a PEM certificate and key to authenticate with instead of a token. All
//     optional (a peer without TLS or credentials, such as `schemaless dev`).
//
// The token and key are stored in the catalog and never shown by GET.
type ReplicationPeerRequest struct {
	Endpoints  []string `json:"endpoints"`
	Datastores []string `json:"datastores"`
	Token      string   `json:"token,omitempty"`
	CACert     string   `json:"ca_cert,omitempty"`
	ClientCert string   `json:"client_cert,omitempty"`
	ClientKey  string   `json:"client_key,omitempty"`
}

// ReplicationStatus answers GET /v1/admin/replication: this cluster's name and, per peer,
// per datastore stream, how far it is.
type ReplicationStatus struct {
	Cluster string                  `json:"cluster"`
	Peers   []ReplicationPeerStatus `json:"peers"`
}

// ReplicationPeerStatus is one peer: its settings (without secrets) and its streams.
type ReplicationPeerStatus struct {
	Peer       string                    `json:"peer"`
	Endpoints  []string                  `json:"endpoints"`
	Datastores []string                  `json:"datastores"`
	Token      bool                      `json:"token"`
	TLS        bool                      `json:"tls"`
	Generation uint64                    `json:"generation"`
	Streams    []ReplicationStreamStatus `json:"streams"`
}

// ReplicationStreamStatus is the stream of one datastore to one peer: a consumer group
// (Group) of this cluster whose workers, on every node, send each shard's cells in added_id
// order.
//
// LagCells sums the shards' cells not yet handled (of every origin: cells that came from other
// clusters are skipped, not sent); LagSeconds is the age of the oldest cell not yet handled;
// Rate is the cells per second the stream moved through its shards' logs over the last
// sampling interval of the node answering; LastError is the last error of that node's
// workers of the stream ("" when their last attempt succeeded), LastErrorAt its time;
// SchemaError the error of that node's last comparison of the datastore's schema versions
// with the peer's ("" when the peer holds every version here, or its missing ones were sent;
// set when the two diverged: each registered another schema for one version). Parked
// counts the cells parked (a key written with different bodies in two clusters), Halted is
// set once the group halted at its threshold.
type ReplicationStreamStatus struct {
	Datastore   string                   `json:"datastore"`
	Group       string                   `json:"group"`
	LagCells    int64                    `json:"lag_cells"`
	LagSeconds  float64                  `json:"lag_seconds"`
	Rate        float64                  `json:"rate"`
	Sent        int64                    `json:"sent"`
	Parked      int                      `json:"parked"`
	Halted      bool                     `json:"halted"`
	LastError   string                   `json:"last_error,omitempty"`
	LastErrorAt *time.Time               `json:"last_error_at,omitempty"`
	SchemaError string                   `json:"schema_error,omitempty"`
	Error       string                   `json:"error,omitempty"`
	Shards      []ReplicationShardStatus `json:"shards"`
}

// ReplicationShardStatus is one shard of a stream: the worker holding it, its committed
// offset (added_id of the last cell handled; -1: none yet), the shard's high water, and the
// lag.
type ReplicationShardStatus struct {
	Shard      int     `json:"shard"`
	Owner      string  `json:"owner,omitempty"`
	Offset     int64   `json:"offset"`
	HighWater  int64   `json:"high_water"`
	LagCells   int64   `json:"lag_cells"`
	LagSeconds float64 `json:"lag_seconds"`
}
