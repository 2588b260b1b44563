package wire

import (
	"encoding/json"
	"time"
)

// The JSON shapes of the HTTP API, shared by the server (package api) and the Go client.

// Cell is a cell as it reads over the API. CreatedAt is RFC 3339 in UTC with microseconds.
type Cell struct {
	RowKey    string          `json:"row_key"`
	ColumnKey string          `json:"column_key"`
	RefKey    int64           `json:"ref_key"`
	Body      json.RawMessage `json:"body"`
	AddedID   int64           `json:"added_id"`
	CreatedAt time.Time       `json:"created_at"`
}

// PutCell is one cell of a put_cells request. RefKey is a json.Number so that a fractional,
// negative or out-of-range ref key is reported with the cell's position.
type PutCell struct {
	RowKey    string          `json:"row_key"`
	ColumnKey string          `json:"column_key"`
	RefKey    json.Number     `json:"ref_key"`
	Body      json.RawMessage `json:"body"`
}

// PutCellsRequest is the body of POST /v1/{datastore}/cells.
type PutCellsRequest struct {
	Cells []PutCell `json:"cells"`
}

// Write statuses of a cell.
const (
	// StatusCreated: the cell was stored by this request.
	StatusCreated = "created"
	// StatusExists: a cell with this key and the same body was already stored; nothing changed.
	StatusExists = "exists"
	// StatusConflict: a cell with this key and another body is stored; nothing changed.
	StatusConflict = "conflict"
)

// PutResult is the outcome of writing one cell. AddedID is the stored cell's added_id (for
// "exists" and "conflict", that of the cell already stored).
type PutResult struct {
	RowKey    string `json:"row_key"`
	ColumnKey string `json:"column_key"`
	RefKey    int64  `json:"ref_key"`
	Status    string `json:"status"`
	AddedID   int64  `json:"added_id"`
}

// PutCellsResponse answers put_cells: one result per request cell, in request order.
type PutCellsResponse struct {
	Results []PutResult `json:"results"`
}

// GetKey is one key of a batch get. Without RefKey it asks for the latest cell of the column.
type GetKey struct {
	RowKey    string       `json:"row_key"`
	ColumnKey string       `json:"column_key"`
	RefKey    *json.Number `json:"ref_key,omitempty"`
}

// GetCellsRequest is the body of POST /v1/{datastore}/cells/get.
type GetCellsRequest struct {
	Keys []GetKey `json:"keys"`
}

// GetCellsResponse answers a batch get: the cells found (in request order) and the keys not
// found, as given.
type GetCellsResponse struct {
	Cells   []Cell   `json:"cells"`
	Missing []GetKey `json:"missing"`
}

// CellsResponse answers a row read (the latest cell of every column, by column key).
type CellsResponse struct {
	Cells []Cell `json:"cells"`
}

// ShardCellsResponse answers get_cells_for_shard: cells in added_id order and the location to
// ask from next (the last added_id returned, or the request's location when none).
type ShardCellsResponse struct {
	Cells        []Cell `json:"cells"`
	NextLocation int64  `json:"next_location"`
}

// Error codes of ErrorBody.Code, with the HTTP status each comes with.
const (
	CodeInvalidArgument = "invalid_argument" // 400
	CodeNotFound        = "not_found"        // 404
	CodeMethod          = "method_not_allowed"
	CodeConflict        = "conflict"      // 409
	CodeTooLarge        = "too_large"     // 413
	CodeUnavailable     = "unavailable"   // 503, with Retry-After; safe to retry
	CodeIndeterminate   = "indeterminate" // 504; a write that may still commit; safe to retry
	CodeInternal        = "internal"      // 500
)

// ErrorBody is the JSON of every error answer: {"error":{"code","message","field"}}. Field
// names the request field at fault for invalid_argument and too_large ("cells[3].ref_key").
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// ClusterStatus answers GET /v1/cluster: this node's view of the cluster.
type ClusterStatus struct {
	Node       string            `json:"node"`
	Nodes      []NodeStatus      `json:"nodes"`
	Datastores []DatastoreStatus `json:"datastores"`
}

// NodeStatus describes one node of the topology.
type NodeStatus struct {
	ID       string `json:"id"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
}

// DatastoreStatus describes one datastore.
type DatastoreStatus struct {
	Name       string            `json:"name"`
	Mode       string            `json:"mode"`
	Shards     int               `json:"shards"`
	Partitions []PartitionStatus `json:"partitions"`
}

// PartitionStatus describes one partition as this node sees it. The raft fields are set only
// when this node hosts a replica of the partition (Local).
type PartitionStatus struct {
	ID           int      `json:"id"`
	FirstShard   int      `json:"first_shard"`
	LastShard    int      `json:"last_shard"`
	Replicas     []string `json:"replicas"`
	Leader       string   `json:"leader"`
	Local        bool     `json:"local"`
	State        string   `json:"state,omitempty"`
	Term         uint64   `json:"term,omitempty"`
	CommitIndex  uint64   `json:"commit_index,omitempty"`
	AppliedIndex uint64   `json:"applied_index,omitempty"`
	LastIndex    uint64   `json:"last_index,omitempty"`
}
