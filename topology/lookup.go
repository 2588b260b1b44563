package topology

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of AsyncDatastores and FindStorageCluster. Their messages list what the topology
// has, so that a caller can say what to name instead.
var (
	// ErrNoDatastore: the topology has no datastore of the name asked for, or no async one.
	ErrNoDatastore = errors.New("topology: no such datastore")
	// ErrNotAsync: the datastore asked for is not in mode async (it has no storage clusters).
	ErrNotAsync = errors.New("topology: not an async datastore")
	// ErrNoStorageCluster: the datastore has no storage cluster of the name asked for.
	ErrNoStorageCluster = errors.New("topology: no such storage cluster")
)

// AsyncDatastores returns the datastore named name, which must be in mode async, or, with name
// "", every datastore in mode async (at least one). It fails with ErrNoDatastore (no datastore
// name, the message listing those there are; or no async datastore at all) or ErrNotAsync.
func (t *Topology) AsyncDatastores(name string) ([]*DatastoreSpec, error) {
	if name != "" {
		ds, ok := t.Datastore(name)
		if !ok {
			names := make([]string, len(t.Datastores))
			for i, d := range t.Datastores {
				names[i] = d.Name
			}
			return nil, fmt.Errorf("%w %q (it has: %s)", ErrNoDatastore, name, strings.Join(names, ", "))
		}
		if ds.Mode != ModeAsync {
			return nil, fmt.Errorf("%w: %s is in mode %s, and storage clusters exist only in mode %s", ErrNotAsync, name, ds.Mode, ModeAsync)
		}
		return []*DatastoreSpec{ds}, nil
	}
	var out []*DatastoreSpec
	for i := range t.Datastores {
		if t.Datastores[i].Mode == ModeAsync {
			out = append(out, &t.Datastores[i])
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w in mode %s", ErrNoDatastore, ModeAsync)
	}
	return out, nil
}

// FindStorageCluster returns the storage cluster named name of d, or ErrNoStorageCluster, the
// message listing d's storage clusters.
func (d *DatastoreSpec) FindStorageCluster(name string) (*StorageClusterSpec, error) {
	if c, ok := d.StorageCluster(name); ok {
		return c, nil
	}
	names := make([]string, len(d.StorageClusters))
	for i, sc := range d.StorageClusters {
		names[i] = sc.Name
	}
	return nil, fmt.Errorf("%w %q in datastore %s (it has: %s)", ErrNoStorageCluster, name, d.Name, strings.Join(names, ", "))
}

// PartitionByID returns the partition of d whose id is id, or nil when d has none.
func (d *DatastoreSpec) PartitionByID(id int) *PartitionSpec {
	for i := range d.Partitions {
		if d.Partitions[i].ID == id {
			return &d.Partitions[i]
		}
	}
	return nil
}
