package api

import (
	"context"
	"io"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Backends are the parts of a node the server serves, one interface per route group. One
// value may implement several (*cluster.Node implements them all). Node is required; a nil
// part leaves its routes out (they answer 404 not_found, or 405 where another part serves the
// path), except Admin, Backup, Catalog and Schemas, whose routes answer 501, and Leader,
// without which answers carry no leader hint.
type Backends struct {
	Node    NodeBackend
	Reads   CellReader
	Writes  CellWriter
	Logs    LogReader
	Groups  GroupBackend
	Indexes IndexBackend
	Schemas SchemaBackend
	Admin   AdminBackend
	Backup  BackupBackend
	Catalog CatalogBackend
	Leader  LeaderHinter
	// Replication serves /v1/admin/replication (replication.go); nil: 501.
	Replication ReplicationBackend
}

// NodeBackend is the node itself: its identity, topology and readiness (GET /healthz,
// /readyz, /v1/cluster) and the datastores every /v1/{ds}/ route checks. Its methods do not
// block.
type NodeBackend interface {
	// ID is the node's id in the topology.
	ID() string
	// Topology is the topology the node runs.
	Topology() *topology.Topology
	// Datastore returns the spec of the datastore name (cluster.ErrUnknownDatastore when the
	// topology has none).
	Datastore(name string) (*topology.DatastoreSpec, error)
	// Ready is the node's readiness (GET /readyz), DatastoreReady one datastore's
	// (GET /readyz?datastore=NAME; cluster.ErrUnknownDatastore for an unknown one).
	Ready() error
	DatastoreReady(name string) error
	// Replicas reports the partitions this node knows of (GET /v1/cluster).
	Replicas() []cluster.ReplicaStatus
}

// CellReader reads cells (get_cell, get_cell_latest, the row read, the versions of a column,
// the batch get; reads.go). Each call blocks until answered or ctx is done; see
// cluster.Node's methods for their errors.
type CellReader interface {
	GetCells(ctx context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error)
	GetRow(ctx context.Context, ds string, rowKey uuid.UUID, c cluster.Consistency) ([]cells.Cell, error)
	GetVersions(ctx context.Context, ds string, rowKey uuid.UUID, col string, from *int64, limit int, desc bool, c cluster.Consistency) ([]cells.Cell, error)
}

// CellWriter writes cells (put_cell, put_cells, transactions; putcell.go, writes.go,
// transactions.go) and erases rows (erase.go). Each call blocks until the write is applied or
// refused, or ctx is done (cluster.ErrIndeterminate: it may still be applied).
type CellWriter interface {
	// Write applies a write request with an idempotency key, conditions or atomicity.
	Write(ctx context.Context, ds string, req cluster.WriteRequest) (cluster.WriteResponse, error)
	// EraseRowFrom erases every cell of a row (DELETE /v1/{ds}/cells/{row}); origin names the
	// cluster a replicated erasure came from ("" for this cluster's own).
	EraseRowFrom(ctx context.Context, ds string, rowKey uuid.UUID, origin string) (cluster.EraseResult, error)
}

// LogReader reads the shard logs (get_cells_for_shard and its batch form; logs.go). ReadLogs
// blocks until a page is ready, req.Wait has passed, or ctx is done.
type LogReader interface {
	ReadLogs(ctx context.Context, ds string, req cluster.LogRead) ([]cluster.LogPage, error)
}

// GroupBackend runs the consumer groups (groups.go). Each call blocks until answered or ctx
// is done.
type GroupBackend interface {
	GroupApply(ctx context.Context, ds, group string, cmd consumer.Command) (consumer.Result, error)
	// Groups lists the datastore's group names.
	Groups(ctx context.Context, ds string, c cluster.Consistency) ([]string, error)
	// GroupProgress is a group's state with each shard's lag (cluster.ErrUnknownGroup for a
	// group that does not exist).
	GroupProgress(ctx context.Context, ds, group string, c cluster.Consistency) (cluster.GroupProgress, error)
}

// IndexBackend serves the secondary-index routes (indexes.go, indexquery.go): the catalog
// and its changes, the index tables, the progress of the maintainers' consumer groups, and the
// cells a query fetches with its entries. Each call blocks until answered or ctx is done.
type IndexBackend interface {
	Catalog(ctx context.Context, ds string, c cluster.Consistency) (*indexes.Catalog, error)
	CatalogApply(ctx context.Context, ds string, cmd indexes.Command) (indexes.Result, error)
	QueryIndex(ctx context.Context, ds, table string, fields []indexes.Field, plan indexes.Plan, c cluster.Consistency) ([]indexes.Entry, error)
	IndexTableStats(ctx context.Context, ds, table string, fields []indexes.Field) (cluster.IndexStats, error)
	DropIndexTable(ctx context.Context, ds, table string) error
	GroupProgress(ctx context.Context, ds, group string, c cluster.Consistency) (cluster.GroupProgress, error)
	// LogProgress is the progress of leases over the shard logs (nil: every shard's whole
	// log to handle).
	LogProgress(ctx context.Context, ds string, leases []consumer.Lease) (cluster.GroupProgress, error)
	GetCells(ctx context.Context, ds string, keys []cluster.GetKey, c cluster.Consistency) ([]cluster.ReadResult, error)
}

// SchemaBackend serves the schema routes (schemas.go). Without it they answer 501
// unimplemented.
type SchemaBackend interface {
	// PutSchema registers text as column's next schema version on every partition.
	PutSchema(ctx context.Context, ds, column string, text []byte) (cluster.SchemaRegistration, error)
	// DryRunSchema counts the latest cells of column text rejects (partitions pids; nil: all).
	DryRunSchema(ctx context.Context, ds, column string, text []byte, pids []int, c cluster.Consistency) (cluster.SchemaDryRun, error)
	// Schemas lists column's versions, or with column "" every column's latest.
	Schemas(ctx context.Context, ds, column string, c cluster.Consistency) ([]schemas.Version, error)
}

// AdminBackend serves the admin routes (admin.go). Without it they answer 501.
type AdminBackend interface {
	Members() []cluster.Member
	PartitionReports(ctx context.Context, ds string) ([]cluster.PartitionReport, error)
	AddVoter(ctx context.Context, ds string, pid int, node string) error
	RemoveVoter(ctx context.Context, ds string, pid int, node string) error
	AddLearner(ctx context.Context, ds string, pid int, node string) (cluster.PartitionConfig, error)
	RemoveLearner(ctx context.Context, ds string, pid int, node string) (cluster.PartitionConfig, error)
	TransferLeadership(ctx context.Context, ds string, pid int, to string) (string, error)
	MoveReplica(ctx context.Context, ds string, pid int, from, to string) error
	Rebalance(ctx context.Context, opts cluster.RebalanceOptions) (cluster.RebalanceReport, error)
	Drain(ctx context.Context, node string, dryRun bool) (cluster.RebalanceReport, error)
	PartitionConfig(ctx context.Context, ds string, pid int) (cluster.PartitionConfig, error)
}

// BackupBackend serves the backup and restore routes (backup.go). Without it they answer 501
// unimplemented. See cluster.Node.Backup and cluster.Node.Restore.
type BackupBackend interface {
	Backup(ctx context.Context, ds string, pid int, w io.Writer) (cluster.BackupInfo, error)
	Restore(ctx context.Context, ds string, pid int, r io.Reader, opts cluster.RestoreOptions) (cluster.RestoreResult, error)
}

// CatalogBackend serves the datastore routes (datastores.go), the split of a partition
// (split.go) and the merge of two (merge.go): the cluster's replicated catalog of datastores,
// created, dropped and re-partitioned at run time. Without it they answer 501. See
// cluster.Node's methods.
type CatalogBackend interface {
	// CreateDatastore creates a datastore and blocks until this node has opened it and its
	// partitions have leaders, or ctx is done (the answer's Ready says which). Errors:
	// *cluster.FieldError (400 naming its field), cluster.ErrDatastoreExists (409),
	// cluster.ErrNoCatalog (503), ctx's error (504: the creation may still be applied).
	CreateDatastore(ctx context.Context, o cluster.CreateDatastoreOptions) (wire.CreateDatastoreResponse, error)
	// DropDatastore drops datastore name; confirm must name it again. It blocks until the
	// catalog has applied the drop or ctx is done. Errors: *cluster.FieldError (400),
	// cluster.ErrUnknownDatastore (404), cluster.ErrNoCatalog (503), ctx's error (504).
	DropDatastore(ctx context.Context, name, confirm string) (wire.DropDatastoreResponse, error)
	// SetDatastoreSettings changes the leader zone and split thresholds of raft datastore name
	// that req gives and blocks until this node applied the change or ctx is done. Errors:
	// *cluster.FieldError (400), cluster.ErrUnknownDatastore (404), cluster.ErrNoCatalog
	// (503), ctx's error (504: the change may still be applied).
	SetDatastoreSettings(ctx context.Context, name string, req wire.DatastoreSettingsRequest) (wire.DatastoreSettingsResponse, error)
	// CatalogDatastores returns the catalog as this node last learned it. It does not block.
	CatalogDatastores() wire.DatastoresResponse
	// SplitPartition splits partition pid of datastore ds at shard req.AtShard (the first
	// shard of the right half; 0: the middle of its range). A raft partition's right half
	// becomes a new partition on the same replicas; the call blocks until this node has
	// applied the split and, when it hosts the new partition, that partition has a leader (the
	// answer's Ready), or ctx is done. An async partition splits in place on its storage
	// cluster, and with req.To its right half then moves to that cluster (the answer's Move)
	// (POST /v1/admin/partitions/{ds}/{partition}/split; split.go). Errors:
	// *cluster.FieldError (400 naming at_shard, to or drop_old), cluster.ErrUnknownDatastore
	// (404), cluster.ErrBadShard (404: no such partition), cluster.ErrRefused (409),
	// cluster.ErrNoCatalog (503), cluster.ErrIndeterminate and ctx's error (504: the split may
	// have been decided).
	SplitPartition(ctx context.Context, ds string, pid int, req wire.SplitRequest) (wire.SplitResponse, error)
	// MoveCatalogVoters gives the votes of the catalog's raft group to voters (1 to 7 node
	// ids), one membership change at a time, and blocks until the catalog records them or ctx
	// is done (POST /v1/admin/catalog/voters). Errors: *cluster.FieldError (400 naming
	// voters), cluster.ErrNoCatalog (503), cluster.ErrIndeterminate and ctx's error (504: run it
	// again with the same voters to finish).
	MoveCatalogVoters(ctx context.Context, voters []string) (wire.CatalogVotersResponse, error)
	// MoveToCluster moves partition pid of async datastore ds to storage cluster req.To, online
	// (copy, catch-up, fenced switch, drain; req.DropOld drops the old copy), and blocks until
	// done or ctx is done (POST /v1/admin/partitions/{ds}/{partition}/cluster; split.go).
	// Errors: *cluster.FieldError (400 naming datastore or to), cluster.ErrUnknownDatastore
	// (404), cluster.ErrBadShard (404), cluster.ErrRefused (409: another move runs),
	// partition.ErrMoveAborted (503: rolled back, send it again), ctx's error (504).
	MoveToCluster(ctx context.Context, ds string, pid int, req wire.ClusterMoveRequest) (wire.ClusterMoveResponse, error)
	// MergePartitions merges partition right of datastore ds into partition left, its left
	// neighbour (raft: after moving right's replicas onto left's nodes; async: after moving
	// right onto left's storage cluster): left keeps its ID and takes both ranges, right is
	// retired. It blocks until this node has applied the merge, or ctx is done (POST
	// /v1/admin/partitions/{ds}/merge; merge.go). Errors: *cluster.FieldError (400 naming left
	// or right: not adjacent, the same partition), cluster.ErrUnknownDatastore (404),
	// cluster.ErrBadShard (404: no such partition), cluster.ErrAsyncDatastore (400),
	// cluster.ErrRefused (409: the partitions changed, or an async move of either runs,
	// meanwhile: nothing merged), cluster.ErrNoCatalog and
	// cluster.ErrUnavailable (503: nothing merged), cluster.ErrIndeterminate and ctx's error
	// (504: the merge may have been decided, and is then completed by the cluster).
	MergePartitions(ctx context.Context, ds string, left, right int) (wire.MergeResponse, error)
}

// LeaderHinter tells where a row's leader-only requests are best sent (see hintLeader).
// LeaderHint does not block; shards <= 0 means it does not know.
type LeaderHinter interface {
	LeaderHint(ds string, rowKey uuid.UUID) (shards int, url string)
}
