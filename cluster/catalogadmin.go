package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/membership"
	"github.com/schemaless-db/schemaless/topology"
	"github.com/schemaless-db/schemaless/wire"
)

// Errors of the catalog's admin operations.
var (
	// ErrDatastoreExists: CreateDatastore of a name the catalog holds.
	ErrDatastoreExists = errors.New("cluster: datastore exists")
	// ErrNoCatalog: the cluster's catalog has no leader within the call's time (fewer than a
	// majority of its replicas run), or this node cannot reach one; retrying is safe.
	ErrNoCatalog = fmt.Errorf("%w: the catalog has no leader", ErrUnavailable)
)

// FieldError is a refused admin request: Field names the request's field at fault ("name",
// "mode", "shards", "partitions", "replicas", "storage_clusters", "confirm", ...) and Msg says
// why. Answered as 400 invalid_argument.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Msg) }

// CreateDatastoreOptions describes a datastore to create at run time (see
// wire.CreateDatastoreRequest for the meaning of each field). Replicas lists the nodes of every
// partition of a raft datastore; when it is empty, ReplicaCount (default 3, or every node when
// fewer are known) nodes are chosen per partition among the nodes gossip sees alive (the
// topology's when there is no gossip), spread so that partition i starts on a different first
// node, which bootstraps its raft group.
type CreateDatastoreOptions struct {
	Name                   string
	Mode                   string
	Shards                 int
	Partitions             int
	Replicas               []string
	ReplicaCount           int
	StorageClusters        []topology.StorageClusterSpec
	BufferClusters         int
	MySQLPrefix            string
	UnsafeNoBufferedWrites bool
	// SplitLoad is the datastore's load-based split threshold (topology.DatastoreSpec.SplitLoad:
	// 0 the node's, negative off).
	SplitLoad float64
	// SplitSize is the datastore's size-based split threshold in bytes
	// (topology.DatastoreSpec.SplitSize: 0 the node's, negative off).
	SplitSize int64
	// LeaderZone is the zone whose nodes should lead the datastore's partitions
	// (topology.DatastoreSpec.LeaderZone; "" none; raft only).
	LeaderZone string
}

// CreateDatastore creates a datastore in the cluster's catalog (forwarded to the catalog's
// leader), then waits, within ctx, until this node has opened it and the partitions it hosts
// have leaders (wire.CreateDatastoreResponse.Ready says whether they did). A raft datastore's
// partitions are placed by o.Replicas or o.ReplicaCount (see CreateDatastoreOptions); an async
// one's partition i is on o.StorageClusters[i % len]. Errors: *FieldError (a field refused),
// ErrDatastoreExists, ErrNoCatalog, ErrIndeterminate (the command was sent and its answer
// lost: it may exist), ctx's error.
func (n *Node) CreateDatastore(ctx context.Context, o CreateDatastoreOptions) (wire.CreateDatastoreResponse, error) {
	spec, err := n.datastoreSpec(o)
	if err != nil {
		return wire.CreateDatastoreResponse{}, err
	}
	cs, err := catalogSpec(spec)
	if err != nil {
		return wire.CreateDatastoreResponse{}, err
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpCreate, Create: cs})
	switch {
	case errors.Is(err, catalog.ErrExists):
		return wire.CreateDatastoreResponse{}, fmt.Errorf("%w: %q", ErrDatastoreExists, o.Name)
	case errors.Is(err, catalog.ErrBadCommand):
		return wire.CreateDatastoreResponse{}, &FieldError{Field: "datastore", Msg: err.Error()}
	case err != nil:
		return wire.CreateDatastoreResponse{}, err
	}
	out := wire.CreateDatastoreResponse{Generation: res.Generation, Warnings: n.placementWarnings(spec)}
	if c := n.cat.cur.Load(); c != nil && c.Datastores[o.Name] != nil {
		out.Datastore = datastoreInfo(c.Datastores[o.Name])
	}
	// Wait for the leaders of the partitions served here, within ctx and at most 10s.
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if n.DatastoreReady(o.Name) == nil {
			out.Ready = true
			return out, nil
		}
		select {
		case <-wait.Done():
			return out, nil
		case <-t.C:
		}
	}
}

// datastoreSpec validates o and returns the normalized topology spec of the datastore.
func (n *Node) datastoreSpec(o CreateDatastoreOptions) (*topology.DatastoreSpec, error) {
	if !cells.ValidDatastoreName(o.Name) {
		return nil, &FieldError{Field: "name", Msg: fmt.Sprintf("%q must match [a-z][a-z0-9_]{0,%d}", o.Name, cells.MaxDatastoreNameLen-1)}
	}
	if o.Mode == "" {
		o.Mode = topology.ModeRaft
	}
	if o.Mode != topology.ModeRaft && o.Mode != topology.ModeAsync {
		return nil, &FieldError{Field: "mode", Msg: fmt.Sprintf("%q: want raft or async", o.Mode)}
	}
	if o.Shards < 1 || o.Shards > topology.MaxShards {
		return nil, &FieldError{Field: "shards", Msg: fmt.Sprintf("%d: want 1 to %d", o.Shards, topology.MaxShards)}
	}
	if o.Partitions == 0 {
		o.Partitions = 1
	}
	if o.Partitions < 1 || o.Partitions > o.Shards {
		return nil, &FieldError{Field: "partitions", Msg: fmt.Sprintf("%d: want 1 to %d (at most one per shard)", o.Partitions, o.Shards)}
	}
	if o.LeaderZone != "" && (o.Mode != topology.ModeRaft || !topology.ZonePattern.MatchString(o.LeaderZone)) {
		return nil, &FieldError{Field: "leader_zone", Msg: fmt.Sprintf("%q: want a zone name matching %s, for a raft datastore", o.LeaderZone, topology.ZonePattern)}
	}
	spec := &topology.DatastoreSpec{Name: o.Name, Mode: o.Mode, Shards: o.Shards, SplitLoad: o.SplitLoad, SplitSize: o.SplitSize, LeaderZone: o.LeaderZone}
	ranges := make([]topology.PartitionSpec, o.Partitions)
	for i := range ranges {
		ranges[i] = topology.PartitionSpec{ID: i, FirstShard: i * o.Shards / o.Partitions, LastShard: (i+1)*o.Shards/o.Partitions - 1}
	}
	if o.Mode == topology.ModeAsync {
		if len(o.Replicas) > 0 || o.ReplicaCount > 0 {
			return nil, &FieldError{Field: "replicas", Msg: "an async datastore's partitions are storage clusters, not replicas"}
		}
		if len(o.StorageClusters) == 0 {
			return nil, &FieldError{Field: "storage_clusters", Msg: "an async datastore needs at least one storage cluster"}
		}
		spec.StorageClusters = slices.Clone(o.StorageClusters)
		spec.BufferClusters, spec.MySQLPrefix, spec.UnsafeNoBufferedWrites = o.BufferClusters, o.MySQLPrefix, o.UnsafeNoBufferedWrites
		for i := range ranges {
			ranges[i].Cluster = o.StorageClusters[i%len(o.StorageClusters)].Name
		}
		spec.Partitions = ranges
		t := topology.Topology{Nodes: n.cfg.Topology.Nodes, Datastores: []topology.DatastoreSpec{*spec}}
		if err := t.Normalize(); err != nil {
			return nil, &FieldError{Field: "storage_clusters", Msg: err.Error()}
		}
		return &t.Datastores[0], nil
	}
	if len(o.StorageClusters) > 0 || o.BufferClusters != 0 || o.MySQLPrefix != "" || o.UnsafeNoBufferedWrites {
		return nil, &FieldError{Field: "storage_clusters", Msg: "only an async datastore has storage clusters and buffered writes"}
	}
	placements, err := n.placeReplicas(o)
	if err != nil {
		return nil, err
	}
	for i := range ranges {
		ranges[i].Replicas = placements[i]
	}
	spec.Partitions = ranges
	return spec, nil
}

// placeReplicas returns the replicas of each of o.Partitions partitions: o.Replicas for every
// one, or o.ReplicaCount (default 3, at most the nodes known) of the nodes gossip sees alive
// (every known node without gossip), taken zone by zone in turn (interleaveZones) and
// partition i starting at the i-th of them, at most zoneCap of one partition's replicas in
// one zone while other zones have nodes (pickZoned).
func (n *Node) placeReplicas(o CreateDatastoreOptions) ([][]string, error) {
	out := make([][]string, o.Partitions)
	if len(o.Replicas) > 0 {
		if o.ReplicaCount != 0 && o.ReplicaCount != len(o.Replicas) {
			return nil, &FieldError{Field: "replicas", Msg: "give a count or a list of nodes, not both"}
		}
		if len(o.Replicas) > catalog.MaxReplicas {
			return nil, &FieldError{Field: "replicas", Msg: fmt.Sprintf("%d nodes: at most %d", len(o.Replicas), catalog.MaxReplicas)}
		}
		seen := map[string]bool{}
		for _, id := range o.Replicas {
			if _, ok := n.nodeSpec(id); !ok {
				return nil, &FieldError{Field: "replicas", Msg: fmt.Sprintf("%q is not a node of this cluster", id)}
			}
			if seen[id] {
				return nil, &FieldError{Field: "replicas", Msg: fmt.Sprintf("%q given twice", id)}
			}
			seen[id] = true
		}
		for i := range out {
			out[i] = slices.Clone(o.Replicas)
		}
		return out, nil
	}
	var nodes []string
	for _, m := range n.Members() {
		if m.State == membership.StateAlive || m.State == "unknown" {
			nodes = append(nodes, m.ID)
		}
	}
	slices.Sort(nodes)
	zones := n.zonesOf(nodes)
	order := interleaveZones(nodes, zones)
	count := o.ReplicaCount
	if count == 0 {
		count = min(3, len(nodes))
	}
	if count < 1 || count > catalog.MaxReplicas {
		return nil, &FieldError{Field: "replicas", Msg: fmt.Sprintf("%d: want 1 to %d", count, catalog.MaxReplicas)}
	}
	if count > len(nodes) {
		return nil, &FieldError{Field: "replicas", Msg: fmt.Sprintf("%d replicas, but %d nodes are alive (%v)", count, len(nodes), nodes)}
	}
	for i := range out {
		out[i] = pickZoned(order, zones, i, count)
	}
	return out, nil
}

// DropDatastore drops datastore name from the catalog; confirm must name it again. Every node
// then closes its partitions and deletes its replicas' data (raft mode; an async datastore's
// MySQL databases stay, for the operator to remove). It returns once this node applied the
// drop. Errors: *FieldError (confirm), ErrUnknownDatastore, ErrNoCatalog, ErrIndeterminate,
// ctx's error.
func (n *Node) DropDatastore(ctx context.Context, name, confirm string) (wire.DropDatastoreResponse, error) {
	if confirm != name {
		return wire.DropDatastoreResponse{}, &FieldError{Field: "confirm", Msg: fmt.Sprintf("must name the datastore again (%q), got %q", name, confirm)}
	}
	res, err := n.applyCatalogCommand(ctx, catalog.Command{Op: catalog.OpDrop, Datastore: name, Confirm: confirm})
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		return wire.DropDatastoreResponse{}, fmt.Errorf("%w: %q", ErrUnknownDatastore, name)
	case errors.Is(err, catalog.ErrBadCommand):
		return wire.DropDatastoreResponse{}, &FieldError{Field: "confirm", Msg: err.Error()}
	case err != nil:
		return wire.DropDatastoreResponse{}, err
	}
	n.log.Warn("dropped a datastore", "datastore", name, "generation", res.Generation)
	return wire.DropDatastoreResponse{Generation: res.Generation, Dropped: name}, nil
}

// CatalogDatastores returns the catalog as this node last applied it: its generation and every
// datastore by name (before the node learned a catalog: generation 0 and the datastores it
// serves from the topology file). It does not block.
func (n *Node) CatalogDatastores() wire.DatastoresResponse {
	c := n.cat.cur.Load()
	if c == nil {
		out := wire.DatastoresResponse{Datastores: []wire.DatastoreInfo{}}
		for _, ds := range n.Topology().Datastores {
			info := wire.DatastoreInfo{Name: ds.Name, Mode: ds.Mode, Shards: ds.Shards}
			for _, p := range ds.Partitions {
				info.Partitions = append(info.Partitions, wire.CatalogPartition{ID: p.ID, FirstShard: p.FirstShard, LastShard: p.LastShard,
					Replicas: p.Replicas, Cluster: p.Cluster, Parent: -1})
			}
			for _, sc := range ds.StorageClusters {
				info.StorageClusters = append(info.StorageClusters, sc.Name)
			}
			out.Datastores = append(out.Datastores, info)
		}
		return out
	}
	out := wire.DatastoresResponse{Generation: c.Generation, Datastores: []wire.DatastoreInfo{}, CatalogVoters: n.catalogVoterIDs()}
	for _, name := range c.Names() {
		out.Datastores = append(out.Datastores, datastoreInfo(c.Datastores[name]))
	}
	return out
}

// datastoreInfo is d as the admin API shows it.
func datastoreInfo(d *catalog.Datastore) wire.DatastoreInfo {
	info := wire.DatastoreInfo{Name: d.Name, Mode: string(d.Mode), Shards: d.Shards, Created: d.Created, CreatedAt: d.CreatedAt}
	for _, p := range d.Partitions {
		info.Partitions = append(info.Partitions, catalogPartition(p))
	}
	if spec, err := specOf(d); err == nil {
		for _, sc := range spec.StorageClusters {
			info.StorageClusters = append(info.StorageClusters, sc.Name)
		}
		info.LeaderZone, info.SplitLoad, info.SplitSize = spec.LeaderZone, spec.SplitLoad, spec.SplitSize
	}
	for _, e := range d.History {
		info.History = append(info.History, wire.CatalogEvent{Op: string(e.Op), Generation: e.Generation, At: e.At, Left: e.Left, Right: e.Right, AtShard: e.AtShard, Auto: e.Auto})
	}
	return info
}

// awaitDatastore returns datastore name once this node serves it, waiting up to wait for the
// catalog's changes to bring it.
func (n *Node) awaitDatastore(name string, wait time.Duration) (*datastore, bool) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		n.cat.mu.Lock()
		ch := n.cat.applied
		n.cat.mu.Unlock()
		if d, ok := n.datastores()[name]; ok {
			return d, true
		}
		if ch == nil {
			return nil, false
		}
		select {
		case <-ch:
		case <-deadline.C:
			return nil, false
		}
	}
}
