package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/schemaless-db/schemaless/catalog"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/internal/atomicfile"
	"github.com/schemaless-db/schemaless/partition"
	"github.com/schemaless-db/schemaless/storage"
	"github.com/schemaless-db/schemaless/topology"
)

// What a node does with a catalog: the datastores it serves from it (opened, reshaped,
// dropped), its cache, and the conversions between the topology's and the catalog's specs.

// startingDatastores returns the datastores the node opens at start, with the catalog
// generation that created each: those of its catalog cache when it has one (the catalog it last
// applied), else the topology file's (created 0).
func (n *Node) startingDatastores() ([]*topology.DatastoreSpec, []uint64, error) {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, catalogCacheFile))
	if errors.Is(err, os.ErrNotExist) {
		var specs []*topology.DatastoreSpec
		for i := range n.cfg.Topology.Datastores {
			ds := n.cfg.Topology.Datastores[i]
			specs = append(specs, &ds)
		}
		return specs, make([]uint64, len(specs)), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: catalog cache: %w", err)
	}
	c, err := catalog.Decode(b)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: catalog cache %s: %w", filepath.Join(n.cfg.DataDir, catalogCacheFile), err)
	}
	var specs []*topology.DatastoreSpec
	var created []uint64
	for _, name := range c.Names() {
		d := c.Datastores[name]
		spec, err := specOf(d)
		if err != nil {
			return nil, nil, fmt.Errorf("cluster: catalog cache: %w", err)
		}
		specs = append(specs, spec)
		created = append(created, d.Created)
	}
	n.cat.cur.Store(c)
	n.warnTopologyIgnored(c)
	return specs, created, nil
}

// warnTopologyIgnored logs each datastore of the topology file that the catalog c does not
// hold as the file says: after the import, the file's datastores are not read.
func (n *Node) warnTopologyIgnored(c *catalog.Catalog) {
	for i := range n.cfg.Topology.Datastores {
		ds := &n.cfg.Topology.Datastores[i]
		d := c.Datastores[ds.Name]
		if d == nil {
			n.log.Warn("a datastore of the topology file is not in the cluster's catalog and is not served: create it with POST /v1/admin/datastores",
				"datastore", ds.Name, "catalog_generation", c.Generation)
			continue
		}
		if spec, err := specOf(d); err == nil && !sameLayout(spec, ds) {
			n.log.Warn("a datastore of the topology file differs from the cluster's catalog, which is served: the file's datastores are read only at a cluster's first start",
				"datastore", ds.Name, "catalog_generation", c.Generation)
		}
	}
}

// specOf returns the topology spec of catalog datastore d: its settings (the spec it was
// created with, JSON) with the catalog's name, mode, shards and partitions.
func specOf(d *catalog.Datastore) (*topology.DatastoreSpec, error) {
	var spec topology.DatastoreSpec
	if len(d.Settings) > 0 {
		if err := json.Unmarshal(d.Settings, &spec); err != nil {
			return nil, fmt.Errorf("datastore %s: settings: %w", d.Name, err)
		}
	}
	spec.Name, spec.Mode, spec.Shards = d.Name, string(d.Mode), d.Shards
	spec.PartitionCount, spec.Replicas, spec.Partitions = 0, nil, nil
	for _, p := range d.Partitions {
		ps := topology.PartitionSpec{ID: p.ID, FirstShard: p.Shards.First, LastShard: p.Shards.Last,
			Replicas: slices.Clone(p.Replicas), Cluster: p.Cluster}
		if p.Origin != p.Shards && p.Origin.Last >= p.Origin.First {
			o := p.Origin
			ps.Origin = &o
		}
		if p.Parent >= 0 {
			parent := p.Parent
			ps.Parent = &parent
		}
		spec.Partitions = append(spec.Partitions, ps)
	}
	return &spec, nil
}

// catalogSpec returns the catalog spec of a normalized topology datastore: its partitions as
// listed, the rest of the spec as its settings.
func catalogSpec(ds *topology.DatastoreSpec) (catalog.Spec, error) {
	rest := *ds
	rest.Partitions, rest.PartitionCount, rest.Replicas = nil, 0, nil
	settings, err := json.Marshal(rest)
	if err != nil {
		return catalog.Spec{}, err
	}
	s := catalog.Spec{Name: ds.Name, Mode: catalog.Mode(ds.Mode), Shards: ds.Shards, Settings: settings}
	for _, p := range ds.Partitions {
		s.Partitions = append(s.Partitions, catalog.Partition{ID: p.ID, Shards: cells.ShardRange{First: p.FirstShard, Last: p.LastShard},
			Replicas: slices.Clone(p.Replicas), Cluster: p.Cluster})
	}
	return s, nil
}

// sameLayout reports whether a and b have the same mode, shards and partitions (IDs, ranges,
// replicas or clusters) and async settings: a node serving a keeps serving it as b.
func sameLayout(a, b *topology.DatastoreSpec) bool {
	ja, _ := json.Marshal(normLayout(a))
	jb, _ := json.Marshal(normLayout(b))
	return bytes.Equal(ja, jb)
}

func normLayout(d *topology.DatastoreSpec) topology.DatastoreSpec {
	c := *d
	c.PartitionCount, c.Replicas = 0, nil
	c.Partitions = slices.Clone(d.Partitions)
	for i := range c.Partitions {
		if len(c.Partitions[i].Replicas) == 0 {
			c.Partitions[i].Replicas = nil
		}
	}
	c.StorageClusters = slices.Clone(d.StorageClusters)
	for i := range c.StorageClusters {
		if len(c.StorageClusters[i].Minions) == 0 {
			c.StorageClusters[i].Minions = nil
		}
	}
	if len(c.Partitions) == 0 {
		c.Partitions = nil
	}
	if len(c.StorageClusters) == 0 {
		c.StorageClusters = nil
	}
	return c
}

// groupName is the name of partition pid's raft group on the node transport: "<ds>/<pid>" for
// a datastore of the topology file, "<ds>/<pid>:g<created>" for one created at run time, so that
// the raft groups of a datastore dropped and created again never exchange a message.
func groupName(ds string, pid int, created uint64) string {
	if created == 0 {
		return fmt.Sprintf("%s/%d", ds, pid)
	}
	return fmt.Sprintf("%s/%d:g%d", ds, pid, created)
}

// applyCatalog makes this node serve catalog c when it is newer than what it serves: it opens
// the datastores it lacks, reopens those whose layout changed, drops those the catalog dropped
// and closes those it never held (a topology file's datastore missing from the catalog: its
// data stays), then stores c in the cache. A datastore that fails to open is logged and tried
// again at the next generation.
func (n *Node) applyCatalog(c *catalog.Catalog) {
	prev := n.cat.cur.Load()
	if prev != nil && c.Generation <= prev.Generation || n.catalogHeld.Load() {
		return
	}
	if prev == nil && c.Generation == 0 {
		return // an empty catalog waiting for its import: keep the topology file's datastores
	}
	n.hostMu.Lock()
	defer n.hostMu.Unlock()
	if n.hostClosed {
		return
	}
	ctx, cancel := n.untilClose(context.Background())
	defer cancel()
	if prev == nil {
		n.warnTopologyIgnored(c)
	}
	old := n.datastores()
	next := map[string]*datastore{}
	for _, name := range c.Names() {
		cd := c.Datastores[name]
		spec, err := specOf(cd)
		if err != nil {
			n.log.Error("catalog: a datastore cannot be served", "datastore", name, "error", err)
			continue
		}
		od := old[name]
		if od != nil && od.created == cd.Created && sameLayout(od.spec, spec) {
			next[name] = od
			continue
		}
		if od != nil && od.created == cd.Created {
			if d := n.reshapeDatastore(od, spec); d != nil {
				next[name] = d // a split or merge: the partitions that stay keep their replicas
				n.prepareSplitCopies(od, d)
				continue
			}
		}
		if od != nil {
			if od.created != cd.Created {
				n.log.Warn("catalog: a datastore was dropped and created again: dropping the old one's data", "datastore", name)
				n.dropDatastore(ctx, od) // dropped and created again while this node did not look
			} else {
				n.log.Warn("catalog: a datastore's layout differs from the one served: reopening it", "datastore", name)
				n.closeDatastore(od)
			}
		}
		d, err := n.openDatastore(ctx, spec, cd.Created)
		if err != nil {
			n.log.Error("catalog: opening a datastore", "datastore", name, "error", err)
			n.closeDatastore(d)
			continue
		}
		next[name] = d
		n.log.Info("catalog: serving a datastore", "datastore", name, "generation", c.Generation, "created", cd.Created)
	}
	for name, od := range old {
		if _, ok := next[name]; ok {
			continue
		}
		if c.Datastores[name] != nil {
			continue // failed to reopen: closed above
		}
		if pd := prevDatastore(prev, name); pd != nil && pd.Created == od.created {
			n.dropDatastore(ctx, od)
			n.log.Warn("catalog: dropped a datastore", "datastore", name, "generation", c.Generation)
		} else {
			n.closeDatastore(od)
		}
	}
	n.setView(next)
	n.cat.cur.Store(c)
	n.openSplitReplicasLocked(ctx, n.lastSplitKick())
	n.cat.mu.Lock()
	close(n.cat.applied)
	n.cat.applied = make(chan struct{})
	n.cat.mu.Unlock()
	n.refreshGossip()
	if err := n.writeCatalogCache(c); err != nil {
		n.log.Error("catalog: writing the cache", "error", err)
	}
}

func prevDatastore(c *catalog.Catalog, name string) *catalog.Datastore {
	if c == nil {
		return nil
	}
	return c.Datastores[name]
}

// writeCatalogCache stores c in <DataDir>/catalog.cache (atomicfile.Write).
func (n *Node) writeCatalogCache(c *catalog.Catalog) error {
	b, err := catalog.Encode(c)
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(n.cfg.DataDir, catalogCacheFile), b)
}

// closeDatastore closes every partition d serves here, their stores and d's storage clusters;
// the data stays.
func (n *Node) closeDatastore(d *datastore) {
	n.closeOrDrop(context.Background(), d, false)
}

// dropDatastore closes d and deletes what this node holds of it: each replica's raft log,
// snapshots and tables, and its entries in replicas.json (an async datastore's MySQL databases
// stay: they are the operator's).
func (n *Node) dropDatastore(ctx context.Context, d *datastore) {
	n.closeOrDrop(ctx, d, true)
}

func (n *Node) closeOrDrop(ctx context.Context, d *datastore, drop bool) {
	if d == nil {
		return
	}
	n.nodeLogMu.Lock()
	nodeLog := n.nodeLog
	n.nodeLogMu.Unlock()
	for _, r := range d.partitions {
		id := storage.PartitionID{Datastore: d.spec.Name, Partition: r.spec.ID}
		var ps *storage.PartitionStore
		if p := r.replica(); p != nil {
			ps = p.Store()
		}
		var errs []error
		errs = append(errs, r.closeReplica())
		if d.spec.Mode == topology.ModeRaft && drop && (ps != nil || n.hosted.state(id.Datastore, id.Partition) != hostedUnknown || hosts(r.spec, n.cfg.NodeID)) {
			errs = append(errs, os.RemoveAll(n.replicaDir(id.Datastore, id.Partition)), partition.DropLog(nodeLog, id))
			if ps == nil {
				var err error
				if ps, err = n.cfg.Store.Partition(ctx, id, r.spec.Shards()); err != nil {
					errs = append(errs, err)
				}
			}
			if ps != nil {
				errs = append(errs, resetStore(ctx, ps))
			}
			errs = append(errs, n.hosted.set(id.Datastore, id.Partition, hostedUnknown))
		}
		if ps != nil {
			errs = append(errs, ps.Close())
		}
		if err := errors.Join(errs...); err != nil {
			n.log.Warn("closing a partition", "datastore", id.Datastore, "partition", id.Partition, "drop", drop, "error", err)
		}
	}
	for _, c := range d.clusters {
		if err := c.Close(); err != nil {
			n.log.Warn("closing a storage cluster", "datastore", d.spec.Name, "cluster", c.Name(), "error", err)
		}
	}
}
