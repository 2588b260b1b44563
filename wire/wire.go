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
//
// In a shard log (get_cells_for_shard), Erased marks a tombstone: the entry that took the
// place of an erased row's cells. Its ColumnKey is TombstoneColumn, its RefKey its AddedID,
// its Body the empty object and its CreatedAt the erasure's time. Erased is absent (false)
// for every cell.
//
// Origin names the cluster the cell was first written in when it arrived from another cluster
// by replication between clusters; absent for a cell written in this cluster.
type Cell struct {
	RowKey    string          `json:"row_key"`
	ColumnKey string          `json:"column_key"`
	RefKey    int64           `json:"ref_key"`
	Body      json.RawMessage `json:"body,omitempty"`
	Stored    []byte          `json:"stored,omitempty"`
	AddedID   int64           `json:"added_id"`
	CreatedAt time.Time       `json:"created_at"`
	Erased    bool            `json:"erased,omitempty"`
	Origin    string          `json:"origin,omitempty"`
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
//
// Origin, for a replicator carrying cells from another cluster, names that cluster (1 to 32
// bytes of [a-z0-9-], starting with a letter; not this cluster's own name): every cell the
// request creates stores it and reads return it (Cell.Origin), and this cluster does not send
// them on to its peers. Only a principal with the replicator or admin role may set it.
//
// Order, only with Origin, chains the request to the earlier requests of a replicator's
// stream, so that the replicator may send a stream's next request before the one before it
// was answered (package peering: docs/api.md, "Ordered streams").
type PutCellsRequest struct {
	Cells  []PutCell `json:"cells"`
	Origin string    `json:"origin,omitempty"`
	Order  *PutOrder `json:"order,omitempty"`
}

// PutOrder chains put_cells requests of one stream of a replicator: the node that receives a
// request with After set applies it only after it has applied the request of the same origin,
// datastore and Stream whose Seq is After (or one with a higher Seq), waiting for it while it
// is in flight or on its way (up to a quarter of a second), else it refuses the request with
// 409 out_of_order and writes nothing; the sender then waits for its earlier requests and
// sends it again without After. A request without After is applied at once and starts (or
// restarts) the chain. Stream is 1 to 64 bytes of [a-zA-Z0-9._:/-] (peering uses the shard
// number); Seq is positive (peering: the origin's added_id of the request's last cell) and
// After is 0 or below Seq. The chain is each node's memory, not the datastore's: a request
// sent to another node than its predecessor, or after a restart, is refused and sent again.
type PutOrder struct {
	Stream string `json:"stream"`
	Seq    int64  `json:"seq"`
	After  int64  `json:"after,omitempty"`
}

// Write statuses of a cell.
const (
	// StatusCreated: the cell was stored by this request.
	StatusCreated = "created"
	// StatusExists: a cell with this key and the same body was already stored; nothing changed.
	StatusExists = "exists"
	// StatusConflict: a cell with this key and another body is stored; nothing changed.
	StatusConflict = "conflict"
	// StatusBuffered (async mode): the primary master did not take the cell, but it is stored
	// in a buffer on another storage cluster; it becomes readable once replayed. Durable, and
	// answered with HTTP 202 by put_cell.
	StatusBuffered = "buffered"
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

// GetCellsResponse answers a batch get: the cells found (in request order), the keys not
// found, as given, and one Snapshot per partition read, by partition.
type GetCellsResponse struct {
	Cells     []Cell     `json:"cells"`
	Missing   []GetKey   `json:"missing"`
	Snapshots []Snapshot `json:"snapshots"`
}

// Snapshot says how a batch get read one partition: every key of the partition in one read
// transaction, as of raft index AppliedIndex of the replica that served it (0 in async mode,
// which has no raft index).
type Snapshot struct {
	Partition    int    `json:"partition"`
	AppliedIndex uint64 `json:"applied_index"`
}

// CellsResponse answers a row read (the latest cell of every column, by column key).
type CellsResponse struct {
	Cells []Cell `json:"cells"`
}

// VersionsResponse answers GET /v1/{ds}/cells/{row}/{col}/versions: a page of the column's
// cells in the order asked, and NextRefKey, the from_ref_key of the next page (null when this
// page is the last).
type VersionsResponse struct {
	Cells      []Cell `json:"cells"`
	NextRefKey *int64 `json:"next_ref_key"`
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
// ("500ms"); Consistency "strong" (default) or "stale", and with "stale" MaxStaleness (a Go
// duration, "2s": a bounded stale read, as the max_staleness query parameter of the cell
// reads); BodyEncoding BodyJSON (default) or BodyStored.
type ShardsCellsRequest struct {
	Shards       []ShardLocation `json:"shards"`
	LocationType string          `json:"location_type,omitempty"`
	Time         *time.Time      `json:"time,omitempty"`
	ColumnKey    string          `json:"column_key,omitempty"`
	Limit        int             `json:"limit,omitempty"`
	Wait         string          `json:"wait,omitempty"`
	Consistency  string          `json:"consistency,omitempty"`
	MaxStaleness *string         `json:"max_staleness,omitempty"`
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

// IndexDefinition is an index definition as the API shows it, in the Schemaless paper's form
// (see indexes.Definition, whose JSON it matches): it can be sent back to POST
// /v1/{datastore}/indexes as it is.
type IndexDefinition struct {
	Table      string           `json:"table"`
	Datastore  string           `json:"datastore,omitempty"`
	ShardField string           `json:"shard_field,omitempty"`
	ColumnDefs []IndexColumnDef `json:"column_defs"`
}

// IndexColumnDef declares the fields an index takes from one source column.
type IndexColumnDef struct {
	ColumnKey string          `json:"column_key"`
	Fields    []IndexFieldDef `json:"fields"`
}

// IndexFieldDef is one field of an index: its key in the column's JSON body and its type
// ("UUID", "string", "int", "float", "bool" or "datetime").
type IndexFieldDef struct {
	Field string `json:"field"`
	Type  string `json:"type"`
}

// Index version states, as IndexVersionStatus.State and IndexDefineResult.State name them.
const (
	// IndexBuilding: the maintainers are backfilling the version; queries are refused (409).
	IndexBuilding = "building"
	// IndexReady: the version is caught up and can be queried and aliased.
	IndexReady = "ready"
	// IndexDropping: the version is being deleted; its tables go away shortly.
	IndexDropping = "dropping"
	// IndexDropped: the version's tables are gone; its number is never reused.
	IndexDropped = "dropped"
)

// IndexDefineResult answers POST /v1/{datastore}/indexes: the version the definition names
// and its state. Created is true (HTTP 201) when this request created the version, false (HTTP
// 200) when an equal definition already had a live version (defining is idempotent).
type IndexDefineResult struct {
	Index   string `json:"index"`
	Version int    `json:"version"`
	State   string `json:"state"`
	Created bool   `json:"created"`
}

// IndexShardProgress is how far the maintainers of an index version are in one shard's log:
// the committed Offset (added_id of the last cell handled; -1: none yet), the shard's
// HighWater, and the lag (cells of every column after the offset, and the age of the oldest).
type IndexShardProgress struct {
	Shard      int     `json:"shard"`
	Owner      string  `json:"owner,omitempty"`
	Offset     int64   `json:"offset"`
	HighWater  int64   `json:"high_water"`
	LagCells   int64   `json:"lag_cells"`
	LagSeconds float64 `json:"lag_seconds"`
}

// IndexVersionStatus is one version of an index. Entries and Violations count its index
// entries and the entries whose shard field a later cell tried to change; the progress fields
// describe its maintainers' consumer group: HandledCells of TotalCells (sums over the shards of
// the committed offsets and of the high-water marks), Progress = HandledCells / TotalCells (1
// when there is nothing to handle), the lag, the live maintainer Workers and, in the answer of
// GET /v1/{datastore}/indexes/{index}, each shard's offsets. Entries and progress are measured
// for building and ready versions only. Error, when set, says which measure could not be read
// (the others are still given). Times are RFC 3339 UTC; ReadyAt and DroppedAt are omitted until
// reached.
type IndexVersionStatus struct {
	Version      int                  `json:"version"`
	State        string               `json:"state"`
	Table        string               `json:"table"`
	Definition   IndexDefinition      `json:"definition"`
	CreatedAt    time.Time            `json:"created_at"`
	ReadyAt      *time.Time           `json:"ready_at,omitempty"`
	DroppedAt    *time.Time           `json:"dropped_at,omitempty"`
	Entries      int64                `json:"entries"`
	Violations   int64                `json:"violations"`
	HandledCells int64                `json:"handled_cells"`
	TotalCells   int64                `json:"total_cells"`
	Progress     float64              `json:"progress"`
	LagCells     int64                `json:"lag_cells"`
	LagSeconds   float64              `json:"lag_seconds"`
	Workers      int                  `json:"workers"`
	Shards       []IndexShardProgress `json:"shards,omitempty"`
	Error        string               `json:"error,omitempty"`
}

// IndexStatus is one index: its name, its alias (the version queries use when they name none;
// 0: no ready version yet) and every version in ascending order, dropped ones included.
type IndexStatus struct {
	Name     string               `json:"name"`
	Alias    int                  `json:"alias"`
	Versions []IndexVersionStatus `json:"versions"`
}

// IndexesResponse answers GET /v1/{datastore}/indexes: every index, sorted by name.
type IndexesResponse struct {
	Indexes []IndexStatus `json:"indexes"`
}

// IndexAliasRequest is the body of POST /v1/{datastore}/indexes/{index}/alias.
type IndexAliasRequest struct {
	Version int `json:"version"`
}

// IndexAliasResult answers an alias switch: the index and its alias now.
type IndexAliasResult struct {
	Index string `json:"index"`
	Alias int    `json:"alias"`
}

// IndexDropResult answers DELETE /v1/{datastore}/indexes/{index}/versions/{version}: the
// version's state now, dropping (its tables are being deleted) or dropped.
type IndexDropResult struct {
	Index   string `json:"index"`
	Version int    `json:"version"`
	State   string `json:"state"`
}

// IndexCond is one condition of an index query: Field compared with Value by Op, one of "=",
// "!=", "<", "<=", ">", ">=" or "in" (Value a list). Value is a JSON string, number or bool,
// typed by the server after the field's type (a datetime as an RFC 3339 string or Unix
// seconds, a UUID as a string).
type IndexCond struct {
	Field string `json:"field"`
	Op    string `json:"op"`
	Value any    `json:"value"`
}

// IndexQuery is the body of POST /v1/{datastore}/indexes/{index}/query: the entries whose shard
// field equals ShardValue and that satisfy every condition of Where, sorted by OrderBy ("f",
// "-f", "f desc"; default: by row key), at most Limit (0: the server's default) after Cursor
// (the NextCursor of the previous page, with the same OrderBy). Fields projects the index's
// fields (default: all); Columns also fetches the latest cell of each of these columns for
// every entry's row. Version queries that index version instead of the alias (0).
type IndexQuery struct {
	ShardValue any         `json:"shard_value"`
	Where      []IndexCond `json:"where,omitempty"`
	Fields     []string    `json:"fields,omitempty"`
	Columns    []string    `json:"columns,omitempty"`
	OrderBy    string      `json:"order_by,omitempty"`
	Limit      int         `json:"limit,omitempty"`
	Cursor     string      `json:"cursor,omitempty"`
	Version    int         `json:"version,omitempty"`
}

// IndexEntry is one entry of a query's answer: the row key, the projected fields by name
// (UUIDs and datetimes as strings, numbers, bools, or null when the row has no value of the
// type), the latest cell of each requested column that the row has, by column key, and
// Violation: 0, or (nonzero) the position the maintainer recorded of the latest cell that
// tried to change the row's shard field, which the entry keeps.
type IndexEntry struct {
	RowKey    string          `json:"row_key"`
	Fields    map[string]any  `json:"fields"`
	Cells     map[string]Cell `json:"cells,omitempty"`
	Violation int64           `json:"violation,omitempty"`
}

// IndexQueryResult answers an index query: the version that answered, a page of entries in
// the query's order, and NextCursor, the cursor of the next page, empty when this page is the
// last (it has fewer entries than the limit). A full last page gives a cursor whose page is
// empty.
type IndexQueryResult struct {
	Index      string       `json:"index"`
	Version    int          `json:"version"`
	Entries    []IndexEntry `json:"entries"`
	NextCursor string       `json:"next_cursor,omitempty"`
}

// Error codes of ErrorBody.Code, with the HTTP status each comes with.
const (
	CodeInvalidArgument = "invalid_argument" // 400
	CodeNotFound        = "not_found"        // 404
	CodeMethod          = "method_not_allowed"
	CodeConflict        = "conflict" // 409
	// CodeOutOfOrder (409): a put_cells request chained by its order.after to a request the
	// node has not applied (PutOrder); nothing was written.
	CodeOutOfOrder = "out_of_order"
	CodeTooLarge   = "too_large" // 413
	// CodeRequestTimeout (408): the request's body did not arrive within the server's body read
	// timeout; the server closes the connection. Nothing was done.
	CodeRequestTimeout = "request_timeout"
	// CodeTooManyRequests (429, with Retry-After): the connection or the client already has the
	// most requests in flight the server allows; nothing was done, retry after Retry-After.
	CodeTooManyRequests = "too_many_requests"
	CodeUnavailable     = "unavailable"   // 503, with Retry-After; safe to retry
	CodeIndeterminate   = "indeterminate" // 504; a write that may still commit; safe to retry
	CodeInternal        = "internal"      // 500
	CodeUnimplemented   = "unimplemented" // 501: a server without backups, or an async datastore's backup
	// CodePreconditionFailed (412): a conditional write or a transaction whose conditions did
	// not hold when it was applied; nothing was written. The error names the column's latest
	// ref key (put_cell: LatestRefKey) or each failed condition (transactions: Failed).
	CodePreconditionFailed = "precondition_failed"
	// CodeCrossPartition (400): a transaction names rows of more than one partition.
	CodeCrossPartition = "cross_partition"
	// CodeIdempotencyKeyReused (422): the request's idempotency key was used within the
	// window for a different request; nothing was written.
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeSchemaViolation (400): a cell's body violates the latest schema of its column; Field
	// names the cell and the JSON pointer of the failing field ("cells[2].body/distance"),
	// ErrorDetail.Violation gives them with the schema version; nothing was written (but see
	// docs/api.md, "Schemas", for a put_cells right after a registration through another node).
	CodeSchemaViolation = "schema_violation"
)

// HeaderIdempotencyKey names a write request (put_cell, put_cells, transactions): 1 to 128
// printable ASCII bytes. A retry with the same key within the window (10 minutes) is answered
// with the first attempt's outcome instead of being applied again.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderReplayed is set to "true" on the answer to a write that repeated an idempotency key:
// the answer is the recorded outcome of the first attempt.
const HeaderReplayed = "Schemaless-Replayed"

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
	// LatestRefKey (precondition_failed of a conditional put_cell) is the column's latest ref
	// key when the write was applied: a number, or null when the column has no cell.
	LatestRefKey json.RawMessage `json:"latest_ref_key,omitempty"`
	// Failed (precondition_failed of a transaction) lists the conditions that did not hold.
	Failed []ConditionFailure `json:"failed,omitempty"`
	// Conflicts (conflict of a transaction) lists the writes whose key holds another body.
	Conflicts []int `json:"conflicts,omitempty"`
	// Violation details a schema_violation (CodeSchemaViolation).
	Violation *SchemaViolation `json:"violation,omitempty"`
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
	// Quiesced is set while this node's replica is quiesced: the partition has been idle for
	// serve --quiesce-after and its group sends no heartbeats until its next request.
	Quiesced bool `json:"quiesced,omitempty"`

	// Async mode: the storage cluster, its members as this node last probed them, and the
	// partition's buffered writes as this node's reaper last saw them.
	Cluster             string                `json:"cluster,omitempty"`
	Master              string                `json:"master,omitempty"`
	Members             []StorageMemberStatus `json:"members,omitempty"`
	BufferDepth         int64                 `json:"buffer_depth,omitempty"`
	BufferOldestSeconds float64               `json:"buffer_oldest_seconds,omitempty"`
	Reaped              int64                 `json:"reaped,omitempty"`
	Replayed            int64                 `json:"replayed,omitempty"`
	ReaperConflicts     int64                 `json:"reaper_conflicts,omitempty"`
}

// StorageMemberStatus is one MySQL server of an async datastore's storage cluster: its role
// ("master", "minion" or "unknown"), its circuit breaker ("closed", "half-open", "open"), its
// GTID position, its replication lag in seconds (-1 when not replicating) and the last probe
// error.
type StorageMemberStatus struct {
	Addr          string `json:"addr"`
	Role          string `json:"role"`
	Breaker       string `json:"breaker"`
	ReadOnly      bool   `json:"read_only"`
	GTIDPosition  string `json:"gtid_position,omitempty"`
	SecondsBehind int64  `json:"seconds_behind"`
	Error         string `json:"error,omitempty"`
}
