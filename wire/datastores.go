package wire

import "time"

// The JSON shapes of the catalog's admin endpoints (/v1/admin/datastores): the datastores of
// the cluster's replicated catalog, created and dropped at run time. See docs/api.md,
// "Datastores".

// CreateDatastoreRequest is the body of POST /v1/admin/datastores.
//
// Name matches [a-z][a-z0-9_]{0,31}; Mode is "raft" (default) or "async"; Shards (1 to
// cells.MaxShards, 10,000, fixed forever) is required; Partitions (default 1, at most Shards)
// is the number of equal contiguous shard ranges.
//
// Replicas places a raft datastore's partitions: absent (or null) for the default (3, or every
// node when fewer are known); a JSON integer from 1 to 9 (int in Go), each partition then
// placed on that many nodes of the cluster, spread so that the leaders' nodes differ; or a
// non-empty list of distinct node ids ([]string in Go), every partition on those nodes. The
// server refuses any other value (a string, 3.0, 0, an empty list) with 400 invalid_argument,
// field "replicas".
//
// An async datastore names its storage clusters (StorageClusters, partition i on cluster
// i % len) and may set BufferClusters, MySQLPrefix and UnsafeNoBufferedWrites, with the
// meanings of the topology file's fields; Replicas must be absent.
type CreateDatastoreRequest struct {
	Name                   string                  `json:"name"`
	Mode                   string                  `json:"mode,omitempty"`
	Shards                 int                     `json:"shards"`
	Partitions             int                     `json:"partitions,omitempty"`
	Replicas               any                     `json:"replicas,omitempty"`
	StorageClusters        []StorageClusterRequest `json:"storage_clusters,omitempty"`
	BufferClusters         int                     `json:"buffer_clusters,omitempty"`
	MySQLPrefix            string                  `json:"mysql_prefix,omitempty"`
	UnsafeNoBufferedWrites bool                    `json:"unsafe_no_buffered_writes,omitempty"`
	// SplitLoad is the requests per second above which a partition of a raft datastore splits
	// on its own: absent or 0 takes the node's (serve --split-load), negative turns it off.
	SplitLoad float64 `json:"split_load,omitempty"`
	// SplitSize is the bytes on disk above which a partition of a raft datastore splits on its
	// own: absent or 0 takes the node's (serve --split-size), negative turns it off.
	SplitSize int64 `json:"split_size,omitempty"`
	// LeaderZone is the zone whose nodes should lead a raft datastore's partitions
	// ([a-z0-9][a-z0-9_.-]{0,63}; absent: none): a rebalance and the cluster's own leadership
	// transfers pick a voter in it when one is alive.
	LeaderZone string `json:"leader_zone,omitempty"`
}

// StorageClusterRequest is one MySQL storage cluster of an async datastore: its name, the DSN
// of its master and of its minions (go-sql-driver/mysql DSNs), as in the topology file.
type StorageClusterRequest struct {
	Name    string   `json:"name"`
	Master  string   `json:"master"`
	Minions []string `json:"minions,omitempty"`
}

// DatastoresResponse answers GET /v1/admin/datastores: the catalog's Generation and every
// datastore, by name.
type DatastoresResponse struct {
	Generation uint64          `json:"generation"`
	Datastores []DatastoreInfo `json:"datastores"`
	// CatalogVoters are the nodes whose replicas of the catalog vote (the topology file's first
	// three until moved: POST /v1/admin/catalog/voters).
	CatalogVoters []string `json:"catalog_voters,omitempty"`
}

// CatalogVotersRequest is the body of POST /v1/admin/catalog/voters: the node ids that are to
// hold the catalog's votes (1 to 7; 3 or 5 keep a majority through a node's loss).
type CatalogVotersRequest struct {
	Voters []string `json:"voters"`
}

// CatalogVotersResponse answers it (200): the catalog generation that records the voters, and
// the voters.
type CatalogVotersResponse struct {
	Generation uint64   `json:"generation"`
	Voters     []string `json:"voters"`
}

// DatastoreInfo is one datastore of the catalog: its name, mode and shard count; Created, the
// catalog generation that created it (0: imported from the topology file at the cluster's
// first start); CreatedAt; its partitions by shard; and History, its latest splits and merges,
// oldest first. StorageClusters names an async datastore's clusters (DSNs are not shown).
type DatastoreInfo struct {
	Name            string             `json:"name"`
	Mode            string             `json:"mode"`
	Shards          int                `json:"shards"`
	Created         uint64             `json:"created"`
	CreatedAt       time.Time          `json:"created_at"`
	Partitions      []CatalogPartition `json:"partitions"`
	StorageClusters []string           `json:"storage_clusters,omitempty"`
	History         []CatalogEvent     `json:"history,omitempty"`
	// LeaderZone is the datastore's preferred leader zone, absent for none.
	LeaderZone string `json:"leader_zone,omitempty"`
	// SplitLoad and SplitSize are the datastore's own split thresholds (requests per second,
	// bytes; absent: the nodes' serve --split-load and --split-size; negative: off).
	SplitLoad float64 `json:"split_load,omitempty"`
	SplitSize int64   `json:"split_size,omitempty"`
}

// DatastoreSettingsRequest is the body of PATCH /v1/admin/datastores/{name}: the settings of a
// raft datastore to change, each optional (absent: unchanged), at least one given.
// LeaderZone "" clears the leader zone; SplitLoad and SplitSize 0 return to the nodes'
// thresholds, negative turns that kind of split off.
type DatastoreSettingsRequest struct {
	LeaderZone *string  `json:"leader_zone,omitempty"`
	SplitLoad  *float64 `json:"split_load,omitempty"`
	SplitSize  *int64   `json:"split_size,omitempty"`
}

// DatastoreSettingsResponse answers PATCH /v1/admin/datastores/{name} (200): the catalog
// generation the change made and the datastore with its new settings.
type DatastoreSettingsResponse struct {
	Generation uint64        `json:"generation"`
	Datastore  DatastoreInfo `json:"datastore"`
}

// CatalogPartition is one partition in the catalog: its id, shard range [FirstShard,
// LastShard], its replicas as the catalog records them (raft: the nodes it was placed on; the
// raft configuration, GET /v1/admin/partitions, is the live truth) and its Learners (raft: the
// nodes added as permanent non-voting replicas, POST .../learners), or its storage Cluster
// (async), the catalog Generation at which it took its range, and Parent, the partition it was
// split from (-1 for one created with its datastore).
type CatalogPartition struct {
	ID         int      `json:"id"`
	FirstShard int      `json:"first_shard"`
	LastShard  int      `json:"last_shard"`
	Replicas   []string `json:"replicas,omitempty"`
	Learners   []string `json:"learners,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Generation uint64   `json:"generation"`
	Parent     int      `json:"parent"`
}

// CatalogEvent is one split or merge of a datastore: Op ("split" or "merge"), the Generation it
// made, its time At, the Left and Right partitions and AtShard, the first shard of the right
// half. Auto is set when the cluster made it (a load- or size-based split, an automatic merge)
// rather than an operator.
type CatalogEvent struct {
	Op         string    `json:"op"`
	Generation uint64    `json:"generation"`
	At         time.Time `json:"at"`
	Left       int       `json:"left"`
	Right      int       `json:"right"`
	AtShard    int       `json:"at_shard"`
	Auto       bool      `json:"auto,omitempty"`
}

// CreateDatastoreResponse answers POST /v1/admin/datastores (201): the catalog generation the
// creation made, the datastore, and Ready, whether every partition had elected a leader when
// the answer was written (a datastore not ready yet takes requests once its leaders are
// elected; GET /readyz?datastore=NAME tells).
type CreateDatastoreResponse struct {
	Generation uint64        `json:"generation"`
	Datastore  DatastoreInfo `json:"datastore"`
	Ready      bool          `json:"ready"`
	// Warnings say what the placement of a raft datastore's partitions cannot meet (a zone
	// holding a majority of a partition's voters, no voter in the leader zone), as
	// RebalanceReport.Warnings; absent when it meets every rule.
	Warnings []string `json:"warnings,omitempty"`
}

// SplitRequest is the body of POST /v1/admin/partitions/{datastore}/{partition}/split: AtShard,
// the first shard of the right half (absent or 0: the boundary that best halves the
// partition's load, as its leader counted it, else the middle of its range; an async
// partition: the middle). For an async datastore only, To names a storage cluster the right
// half then moves to (a ClusterMoveRequest of the right half), with DropOld as there.
type SplitRequest struct {
	AtShard int    `json:"at_shard,omitempty"`
	To      string `json:"to,omitempty"`
	DropOld bool   `json:"drop_old,omitempty"`
}

// ClusterMoveRequest is the body of POST /v1/admin/partitions/{datastore}/{partition}/cluster
// (async datastores): To, the storage cluster to move the partition to, and DropOld, whether to drop
// the old copy (its shard databases and KV rows; its fence stays) once the buffer rows written
// before the switch are reaped.
type ClusterMoveRequest struct {
	To      string `json:"to"`
	DropOld bool   `json:"drop_old,omitempty"`
}

// ClusterMoveResponse describes a move of an async partition (200, or the Move of a SplitResponse):
// From and To, the placement Epoch naming To, AlreadyThere (nothing to do), Resumed (an
// interrupted switch was finished), the cells of the bulk copy and of the final catch-up, how
// long the partition's write lock was held at the switch (LockHeldMillis: writes to the
// partition waited), Drained and Dropped, and TookMillis end to end. Error, in a split's
// answer only, says why the move of the split's right half failed (the split stands; send the
// move again).
type ClusterMoveResponse struct {
	Partition      int    `json:"partition"`
	From           string `json:"from"`
	To             string `json:"to"`
	Epoch          int64  `json:"epoch"`
	AlreadyThere   bool   `json:"already_there,omitempty"`
	Resumed        bool   `json:"resumed,omitempty"`
	CopiedCells    int64  `json:"copied_cells"`
	FinalCells     int64  `json:"final_cells"`
	LockHeldMillis int64  `json:"lock_held_ms"`
	Drained        bool   `json:"drained"`
	Dropped        bool   `json:"dropped"`
	TookMillis     int64  `json:"took_ms"`
	Error          string `json:"error,omitempty"`
}

// SplitResponse answers a split (200): the catalog generation it made, the Left half (the
// partition, which keeps its ID) and the Right half (a new partition on the same replicas),
// Ready, whether the right half had a leader on the answering node when it answered (always
// true when that node hosts no replica of it), and TookMillis, the split's time end to end.
// For an async partition, PauseMillis is how long writes to the partition waited for the split
// (its write lock on the master), and Move describes the move of the right half that To asked
// for. Learners are the learners of the parent (raft mode) added to the right half after it
// took writes (a learner that could not be added is missing, and logged).
type SplitResponse struct {
	Generation  uint64               `json:"generation"`
	Left        CatalogPartition     `json:"left"`
	Right       CatalogPartition     `json:"right"`
	Ready       bool                 `json:"ready"`
	TookMillis  int64                `json:"took_ms"`
	PauseMillis int64                `json:"pause_ms,omitempty"`
	Move        *ClusterMoveResponse `json:"move,omitempty"`
	Learners    []string             `json:"learners,omitempty"`
}

// MergeRequest is the body of POST /v1/admin/partitions/{datastore}/merge: Left and Right,
// the IDs of two adjacent partitions of a raft datastore (Right's first shard right after
// Left's last) on the same replicas.
type MergeRequest struct {
	Left  int `json:"left"`
	Right int `json:"right"`
}

// MergeResponse answers a merge (200): the catalog generation it made, Merged, the partition
// that holds both ranges now (it keeps Left's ID; Right's ID is retired), and TookMillis, the
// merge's time end to end, of which PauseMillis the writes to Right's shards waited (from
// Right refusing them to Left holding them).
type MergeResponse struct {
	Generation  uint64           `json:"generation"`
	Merged      CatalogPartition `json:"merged"`
	TookMillis  int64            `json:"took_ms"`
	PauseMillis int64            `json:"pause_ms"`
	// ReplicasMoved is how many replicas of the right partition moved onto the left one's
	// nodes before the merge (0 when they were on the same nodes already).
	ReplicasMoved int `json:"replicas_moved,omitempty"`
	// Move, for an async datastore whose right partition was on another storage cluster, is
	// its move onto the left one's before the merge.
	Move *ClusterMoveResponse `json:"move,omitempty"`
}

// DropDatastoreResponse answers DELETE /v1/admin/datastores/{name}?confirm={name} (200): the
// catalog generation the drop made.
type DropDatastoreResponse struct {
	Generation uint64 `json:"generation"`
	Dropped    string `json:"dropped"`
}
