package wire

import (
	"encoding/json"
	"time"
)

// The JSON shapes of the HTTP API, shared by the server (package api) and the Go client.

// Cell is a cell as it reads over the API. CreatedAt is RFC 3339 in UTC with microseconds.
// Body is the JSON object; a log read with body_encoding "stored" sends Stored instead: the
// body's stored form (MessagePack with sorted keys, zlib; see cells.Body), base64 in JSON,
// which costs neither side a re-encoding.
type Cell struct {
	RowKey    string          `json:"row_key"`
	ColumnKey string          `json:"column_key"`
	RefKey    int64           `json:"ref_key"`
	Body      json.RawMessage `json:"body,omitempty"`
	Stored    []byte          `json:"stored,omitempty"`
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

// ShardCellsResponse answers get_cells_for_shard: cells in added_id order, the location to
// ask from next, and the shard's high-water mark. NextLocation is the last added_id returned
// when the page is full; otherwise the position the read reached (with a column filter, past
// cells of other columns), so reading on from it never skips a cell and never rereads one.
// HighWater is the shard's highest added_id when the page was read.
type ShardCellsResponse struct {
	Shard        int    `json:"shard"`
	Cells        []Cell `json:"cells"`
	NextLocation int64  `json:"next_location"`
	HighWater    int64  `json:"high_water"`
}

// ShardLocation is one shard of a batch log read and the location to read after.
type ShardLocation struct {
	Shard    int   `json:"shard"`
	Location int64 `json:"location"`
}

// ShardsCellsRequest is the body of POST /v1/{datastore}/shards/cells, the batch form of
// get_cells_for_shard. LocationType is "added_id" (default) or "timestamp" (then Time, RFC
// 3339, is the start of every shard and the locations are ignored). Wait is a Go duration
// ("500ms"); Consistency "strong" (default) or "stale"; BodyEncoding BodyJSON (default) or
// BodyStored.
type ShardsCellsRequest struct {
	Shards       []ShardLocation `json:"shards"`
	LocationType string          `json:"location_type,omitempty"`
	Time         *time.Time      `json:"time,omitempty"`
	ColumnKey    string          `json:"column_key,omitempty"`
	Limit        int             `json:"limit,omitempty"`
	Wait         string          `json:"wait,omitempty"`
	Consistency  string          `json:"consistency,omitempty"`
	BodyEncoding string          `json:"body_encoding,omitempty"`
}

// Body encodings of a log read.
const (
	// BodyJSON: cells carry Body, the JSON object (the default).
	BodyJSON = "json"
	// BodyStored: cells carry Stored, the body's stored form.
	BodyStored = "stored"
)

// ShardsCellsResponse answers the batch form: one page per requested shard, in request order.
type ShardsCellsResponse struct {
	Shards []ShardCellsResponse `json:"shards"`
}

// GroupCommand is the body of POST /v1/{datastore}/groups/{group}/{op}: the fields of
// consumer.Command, with SessionTimeout as a Go duration string ("3s"). The op comes from the
// path.
type GroupCommand struct {
	Worker         string        `json:"worker,omitempty"`
	SessionTimeout string        `json:"session_timeout,omitempty"`
	HaltThreshold  int           `json:"halt_threshold,omitempty"`
	Start          *GroupStart   `json:"start,omitempty"`
	Released       []int         `json:"released,omitempty"`
	Commits        []GroupOffset `json:"commits,omitempty"`
	Park           *GroupParked  `json:"park,omitempty"`
	Epoch          uint64        `json:"epoch,omitempty"`
	IDs            []uint64      `json:"ids,omitempty"`
	All            bool          `json:"all,omitempty"`
}

// GroupStart is a group's start position: Kind "earliest", "latest" or "timestamp" (with Time).
type GroupStart struct {
	Kind string     `json:"kind"`
	Time *time.Time `json:"time,omitempty"`
}

// GroupOffset is an offset to commit: the added_id of the last cell handled in Shard, fenced
// by the committer's lease Epoch.
type GroupOffset struct {
	Shard  int    `json:"shard"`
	Epoch  uint64 `json:"epoch"`
	Offset int64  `json:"offset"`
}

// GroupParked is a parked cell (see consumer.ParkedCell).
type GroupParked struct {
	ID        uint64    `json:"id"`
	Shard     int       `json:"shard"`
	AddedID   int64     `json:"added_id"`
	RowKey    string    `json:"row_key"`
	ColumnKey string    `json:"column_key"`
	RefKey    int64     `json:"ref_key"`
	Error     string    `json:"error"`
	Attempts  int       `json:"attempts"`
	Worker    string    `json:"worker,omitempty"`
	ParkedAt  time.Time `json:"parked_at,omitzero"`
	Retry     bool      `json:"retry,omitempty"`
}

// GroupMember is a live member of a group.
type GroupMember struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
	Shards  int       `json:"shards"`
}

// GroupLease is a shard's lease and committed offset (-1: none yet).
type GroupLease struct {
	Shard  int    `json:"shard"`
	Owner  string `json:"owner,omitempty"`
	Epoch  uint64 `json:"epoch"`
	Offset int64  `json:"offset"`
}

// GroupResult answers a group command (see consumer.Result).
type GroupResult struct {
	Generation     uint64        `json:"generation"`
	Members        []GroupMember `json:"members"`
	Assigned       []GroupLease  `json:"assigned,omitempty"`
	Revoke         []int         `json:"revoke,omitempty"`
	SessionExpires *time.Time    `json:"session_expires,omitempty"`
	Halted         bool          `json:"halted"`
	Parked         int           `json:"parked"`
	Retry          []GroupParked `json:"retry,omitempty"`
	Accepted       []bool        `json:"accepted,omitempty"`
	Fenced         bool          `json:"fenced,omitempty"`
	Affected       uint64        `json:"affected,omitempty"`
}

// GroupShardStatus is one shard of a group's status: its lease, the shard's high-water mark,
// and the lag: LagCells cells of the shard's log (all columns) after the committed offset, and
// LagSeconds, the age of the oldest of them (0 when caught up).
type GroupShardStatus struct {
	Shard      int     `json:"shard"`
	Owner      string  `json:"owner,omitempty"`
	Epoch      uint64  `json:"epoch"`
	Offset     int64   `json:"offset"`
	HighWater  int64   `json:"high_water"`
	LagCells   int64   `json:"lag_cells"`
	LagSeconds float64 `json:"lag_seconds"`
}

// GroupStatus answers GET /v1/{datastore}/groups/{group}.
type GroupStatus struct {
	Group         string             `json:"group"`
	Generation    uint64             `json:"generation"`
	Start         GroupStart         `json:"start"`
	HaltThreshold int                `json:"halt_threshold"`
	Halted        bool               `json:"halted"`
	Members       []GroupMember      `json:"members"`
	Shards        []GroupShardStatus `json:"shards"`
	Parked        []GroupParked      `json:"parked"`
	LagCells      int64              `json:"lag_cells"`
	LagSeconds    float64            `json:"lag_seconds"`
}

// GroupsResponse answers GET /v1/{datastore}/groups.
type GroupsResponse struct {
	Groups []string `json:"groups"`
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
