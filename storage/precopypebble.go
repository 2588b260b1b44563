package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
	"github.com/google/uuid"
)

// A split on pebble shares the right half's cells with the parent and copies only the state
// the right half needs of its own, of which the request records are nearly all
// (ShareShards): a record per write that carried an idempotency key within
// command.RequestWindow, so a partition that takes thousands of writes a second holds millions.
// The split's entry copied them while the parent applied nothing: 0.7 to 1.7 s for 5,000
// records of put_cells of 100 cells (7 MB on disk), a pause of every write to the parent
// (BENCHMARKS.md). PrepareSplit moves that copy ahead of the split, while the parent keeps
// applying:
//
//  1. it registers the pre-copy with the partition, so that every transaction that commits
//     from then on adds to it the request IDs it stored or deleted (noteRequests);
//  2. it takes a pebble snapshot of the partition and writes the snapshot's request records,
//     under a new generation, into sstables that pebble ingests (the parent's memtable and
//     log take none of it).
//
// At the split, ShareShards makes that generation the right half's state and brings it to the
// split's snapshot: for each ID touched since the registration, it deletes what the pre-copy
// holds of it and copies what the snapshot holds (catchUp). A commit that the pre-copy's
// snapshot does not see committed after the registration, so it noted its IDs: every record
// the two snapshots hold differently has a touched ID, and the right half ends with exactly the
// records of the split's snapshot, as with a full copy. Each replica makes its own pre-copy at
// its own time; they all end the same.
//
// What changes records without naming their IDs voids the pre-copy, and the split then copies
// every record as before: a merge's absorb into the parent (noted at its commit), a restore of
// the parent (its state moves to another generation: ShareShards compares the prefixes), and
// more than precopyMaxTouched IDs touched. A pre-copy not used within PrecopyKeep, or of a
// partition that closes, is dropped with its generation; one left by a crash is an orphaned
// generation, which the store deletes when it opens.

// precopyMaxTouched bounds the IDs a pebble pre-copy tracks (16 bytes each): past it the
// pre-copy is void.
const precopyMaxTouched = 1 << 20

// pebblePrecopy is the pebble part of a precopy (see above).
type pebblePrecopy struct {
	ps *pebbleStore
	// gen is the generation the records were ingested under, and prefix the parent's state
	// prefix they were read from; set before the precopy's done closes (0, nil: it failed).
	gen    uint64
	prefix []byte
	// touched holds the request IDs that the parent's commits stored or deleted since the
	// registration, and void says a commit changed records in another way; both under the
	// precopySet's mu while the pre-copy is registered, and its taker's alone after.
	touched map[uuid.UUID]struct{}
	void    bool
	// used: ShareShards made gen the right half's state; release leaves it then.
	used atomic.Bool
}

// release deletes the pre-copy's generation unless a split used it.
func (pb *pebblePrecopy) release() {
	if pb.gen == 0 || pb.used.Load() {
		return
	}
	_ = pb.ps.db.DeleteRange(dataPrefix(pb.gen), dataPrefix(pb.gen+1), pebble.NoSync)
}

// precopyPebble makes pb (PrepareSplit's step 2, above; pb is registered already).
func (p *PartitionStore) precopyPebble(pb *pebblePrecopy) error {
	ctx, cancel := context.WithTimeout(context.Background(), PrecopyKeep)
	defer cancel()
	if p.closed.Load() {
		return ErrClosed
	}
	snap, err := p.pebbleBeginSnapshot()
	if err != nil {
		return err
	}
	defer snap.Close()
	gen, err := p.pb.ps.allocGen()
	if err != nil {
		return p.fail("pre-copy: allocate a generation", err)
	}
	if err := p.pb.ps.ingestCopy(ctx, snap, requestKeyRanges(snap), dataPrefix(gen)); err != nil {
		_ = p.pb.db.DeleteRange(dataPrefix(gen), dataPrefix(gen+1), pebble.NoSync)
		return fmt.Errorf("storage: pre-copy of partition %d: request records: %w", p.id.Partition, err)
	}
	pb.gen, pb.prefix = gen, snap.view.prefix
	return nil
}

// noteRequests adds ids, the request IDs a transaction of p stored or deleted and has just
// committed, to p's pebble pre-copies, or voids them (void: the transaction changed records in
// another way).
func (p *PartitionStore) noteRequests(ids []uuid.UUID, void bool) {
	pcs := &p.precopies
	pcs.mu.Lock()
	defer pcs.mu.Unlock()
	for _, pc := range pcs.m {
		pb := pc.pebble
		if pb == nil || pb.void {
			continue
		}
		if void || len(pb.touched)+len(ids) > precopyMaxTouched {
			pb.void, pb.touched = true, nil
			continue
		}
		for _, id := range ids {
			pb.touched[id] = struct{}{}
		}
	}
}

// usableFor reports whether pb, taken for a split, holds the records of src's partition state
// generation, which it then brings up to src (catchUp).
func (pb *pebblePrecopy) usableFor(src *SnapshotTx) bool {
	return pb.gen != 0 && !pb.void && pb.ps == src.view.ps && bytes.Equal(pb.prefix, src.view.prefix)
}

// catchUp writes into b, under view (the partition with pb.gen as its state generation), the
// request records of every ID touched since pb's registration as src (the split's snapshot)
// holds them: what pb holds of the ID deleted, record and place in time order, then src's
// copied. It returns the number of IDs.
func (pb *pebblePrecopy) catchUp(ctx context.Context, b *pebble.Batch, src *SnapshotTx, view *pebblePart) (int, error) {
	ids := make([]uuid.UUID, 0, len(pb.touched))
	for id := range pb.touched {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for i, id := range ids {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return i, err
			}
		}
		k := view.requestKey(id)
		old, ok, err := getCopy(view.db, k)
		if err != nil {
			return i, err
		}
		if ok {
			if len(old) < 8 {
				return i, errBadValue
			}
			if err := b.Delete(k, nil); err != nil {
				return i, err
			}
			if err := b.Delete(view.requestTimeKey(int64(binary.BigEndian.Uint64(old)), id), nil); err != nil {
				return i, err
			}
		}
		v, ok, err := getCopy(src.snap, src.view.requestKey(id))
		if err != nil {
			return i, err
		}
		if !ok {
			continue // deleted since the pre-copy (pruned)
		}
		if len(v) < 8 {
			return i, errBadValue
		}
		if err := b.Set(k, v, nil); err != nil {
			return i, err
		}
		if err := b.Set(view.requestTimeKey(int64(binary.BigEndian.Uint64(v)), id), nil, nil); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}
