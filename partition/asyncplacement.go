package partition

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/schemaless-db/schemaless/storage"
)

// asyncPlacement is where the partition lives as far as this node knows: its primary cluster,
// its buffer clusters (every other cluster) and the epoch of the placement record that said so
// (0: the topology's placement). Never modified once published.
type asyncPlacement struct {
	primary *StorageCluster
	buffers []*StorageCluster
	epoch   int64
}

// placement returns the current placement.
func (a *Async) placement() *asyncPlacement { return a.place.Load() }

// PlacementSource reads the placement record of one partition of an async datastore
// (storage.Placement).
type PlacementSource interface {
	// ReadPlacement returns the record with the highest epoch it could read, and false when
	// it read none (the partition lives where the topology places it). An error means it
	// could read nothing at all. Blocks on I/O until ctx ends.
	ReadPlacement(ctx context.Context) (storage.Placement, bool, error)
}

// MastersPlacement returns the PlacementSource that reads the placement record of datastore's
// partition on the master of each of clusters (concurrently, through each member's circuit
// breaker) and takes the one with the highest epoch; masters that do not answer are skipped.
func MastersPlacement(clusters []*StorageCluster, datastore string, partition int) PlacementSource {
	return mastersPlacement{clusters: clusters, datastore: datastore, partition: partition}
}

type mastersPlacement struct {
	clusters  []*StorageCluster
	datastore string
	partition int
}

func (s mastersPlacement) ReadPlacement(ctx context.Context) (storage.Placement, bool, error) {
	reads := readPlacements(ctx, s.clusters, s.datastore, s.partition)
	var (
		best    storage.Placement
		found   bool
		answers int
		lastErr error
	)
	for _, r := range reads {
		if r.err != nil {
			lastErr = r.err
			continue
		}
		answers++
		if r.found && (!found || r.rec.Epoch > best.Epoch) {
			best, found = r.rec, true
		}
	}
	if answers == 0 && lastErr != nil {
		return storage.Placement{}, false, lastErr
	}
	return best, found, nil
}

// placementRead is the placement record one cluster's master holds.
type placementRead struct {
	cluster *StorageCluster
	rec     storage.Placement
	found   bool
	err     error
}

// readPlacements reads the placement record of datastore's partition on the master of every
// cluster, concurrently; one result per cluster, in order.
func readPlacements(ctx context.Context, clusters []*StorageCluster, datastore string, partition int) []placementRead {
	out := make([]placementRead, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		out[i].cluster = c
		wg.Go(func() {
			r := &out[i]
			_, m, err := c.masterMember(ctx)
			if err != nil {
				r.err = err
				return
			}
			r.err = m.run(func() error {
				st, err := m.writeStore(ctx, c)
				if err != nil {
					return err
				}
				r.rec, r.found, err = st.ReadPlacement(ctx, datastore, partition)
				return err
			})
		})
	}
	wg.Wait()
	return out
}

// placementLoop re-reads the placement every PlacementInterval, the first time at once.
func (a *Async) placementLoop() {
	defer a.wg.Done()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = a.refreshPlacement(ctx)
		cancel()
		select {
		case <-time.After(a.cfg.PlacementInterval):
		case <-a.stop:
			return
		}
	}
}

// refreshPlacement reads the placement record and, when its epoch is above the current one,
// switches to the cluster it names: that cluster becomes the primary and every other one a
// buffer. A record naming a cluster the partition does not know is refused (and logged).
func (a *Async) refreshPlacement(ctx context.Context) error {
	a.placeMu.Lock()
	defer a.placeMu.Unlock()
	rec, ok, err := a.cfg.Placement.ReadPlacement(ctx)
	if err != nil {
		return err
	}
	cur := a.placement()
	if !ok || rec.Epoch <= cur.epoch {
		return nil
	}
	var to *StorageCluster
	for _, c := range a.all {
		if c.Name() == rec.Cluster {
			to = c
		}
	}
	if to == nil {
		err := fmt.Errorf("partition: placement epoch %d of %s/%d names storage cluster %q, which is not one of the datastore's", rec.Epoch, a.cfg.Datastore, a.cfg.Partition, rec.Cluster)
		a.cfg.Logger.Error("partition: placement refused; the partition stays where it is", "error", err)
		return err
	}
	next := &asyncPlacement{primary: to, epoch: rec.Epoch}
	for _, c := range a.all {
		if c != to {
			next.buffers = append(next.buffers, c)
		}
	}
	a.place.Store(next)
	if to != cur.primary {
		a.cfg.Logger.Info("partition: placement changed: the partition moved to another storage cluster",
			"datastore", a.cfg.Datastore, "partition", a.cfg.Partition, "from", cur.primary.Name(), "to", to.Name(), "epoch", rec.Epoch)
	}
	return nil
}

// movedRetry paces the retries of an operation refused as moved.
type movedRetry struct {
	a        *Async
	deadline time.Time
	backoff  time.Duration
}

func (a *Async) movedRetry() *movedRetry {
	return &movedRetry{a: a, deadline: time.Now().Add(a.cfg.MovedWait), backoff: 10 * time.Millisecond}
}

// again is called after placement pl's primary refused an operation as moved. It re-reads the
// placement and reports whether to try again: at once when the placement changed, otherwise
// (the switch is under way: the new primary is fenced until the move's final catch-up is
// done) after a backoff, until MovedWait has passed since the first attempt, ctx ends or the
// partition closes.
func (r *movedRetry) again(ctx context.Context, pl *asyncPlacement) bool {
	r.a.moved.Add(1)
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := r.a.refreshPlacement(rctx)
	cancel()
	if err == nil && r.a.placement() != pl {
		return true
	}
	if time.Now().Add(r.backoff).After(r.deadline) {
		return false
	}
	select {
	case <-time.After(r.backoff):
	case <-ctx.Done():
		return false
	case <-r.a.stop:
		return false
	}
	r.backoff = min(2*r.backoff, 200*time.Millisecond)
	return true
}
