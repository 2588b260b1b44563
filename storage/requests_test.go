package storage

import (
	"context"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The requests table on both engines: put (upsert), insert (new IDs only), look up, latest ref key, prune by time,
// snapshot scan, restore, and the partition's records kept apart from another partition's.
func TestRequestRecords(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		s := e.open(t)
		p := openPartition(t, s, "trips", 0, 0, 3)
		other := openPartition(t, s, "trips", 1, 4, 7)
		ids := make([]uuid.UUID, 5)
		for i := range ids {
			ids[i] = uuid.Must(uuid.NewV7())
		}
		put := func(p *PartitionStore, rs ...RequestRecord) {
			tx, err := p.Begin(ctx)
			require.NoError(t, err)
			require.NoError(t, tx.PutRequests(ctx, rs))
			require.NoError(t, tx.Commit())
		}
		rec := func(i int, at time.Time, what string) RequestRecord {
			return RequestRecord{ID: ids[i], CreatedAt: at, Record: []byte(what)}
		}
		put(p, rec(0, baseTime, "a"), rec(1, baseTime.Add(time.Minute), "b"), rec(2, baseTime.Add(2*time.Minute), "c"))
		put(other, rec(3, baseTime, "other"))
		put(p, rec(1, baseTime.Add(3*time.Minute), "b2")) // an upsert replaces

		// InsertRequests refuses a stored ID with ErrDuplicate (in the other partition's records
		// the same ID is new), and stores new ones.
		tx, err := p.Begin(ctx)
		require.NoError(t, err)
		err = tx.InsertRequests(ctx, []RequestRecord{rec(4, baseTime, "new"), rec(0, baseTime, "again")})
		assert.ErrorIs(t, err, ErrDuplicate, "an ID stored before")
		require.NoError(t, tx.Rollback())
		tx, err = other.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, tx.InsertRequests(ctx, []RequestRecord{rec(0, baseTime, "other0")}), "the ID is new in this partition")
		require.NoError(t, tx.Rollback())

		tx, err = p.Begin(ctx)
		require.NoError(t, err)
		got, err := tx.LookupRequests(ctx, []uuid.UUID{ids[0], ids[1], ids[3], ids[4]})
		require.NoError(t, err)
		assert.Len(t, got, 2, "records of this partition only")
		assert.Equal(t, "a", string(got[ids[0]].Record))
		assert.Equal(t, "b2", string(got[ids[1]].Record), "the upsert replaced the record")
		assert.True(t, got[ids[1]].CreatedAt.Equal(baseTime.Add(3*time.Minute).Truncate(time.Microsecond)), "created_at in microseconds: %v", got[ids[1]].CreatedAt)
		// Prune what is older than 90 s after baseTime: the records at 0 s only (b2 is at 3 min).
		n, err := tx.PruneRequests(ctx, baseTime.Add(90*time.Second), 10)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n, "pruned")
		require.NoError(t, tx.Commit())

		// A snapshot carries the remaining records, in ID order.
		snap, err := p.BeginSnapshot(ctx)
		require.NoError(t, err)
		var scanned []RequestRecord
		require.NoError(t, snap.ScanRequests(ctx, func(r RequestRecord) error { scanned = append(scanned, r); return nil }))
		require.NoError(t, snap.Close())
		require.Len(t, scanned, 2)
		assert.Equal(t, []uuid.UUID{ids[1], ids[2]}, []uuid.UUID{scanned[0].ID, scanned[1].ID})

		// Restore replaces the partition's records with the stream's and leaves the other's.
		recs := []RequestRecord{rec(4, baseTime, "restored")}
		i := 0
		next := func() (RestoreRecord, error) {
			if i == len(recs) {
				return RestoreRecord{}, io.EOF
			}
			i++
			return RestoreRecord{Request: &recs[i-1]}, nil
		}
		require.NoError(t, p.Restore(ctx, AppliedState{Index: 9, Term: 1}, next, nil, nil))
		tx, err = p.Begin(ctx)
		require.NoError(t, err)
		got, err = tx.LookupRequests(ctx, ids)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		assert.Len(t, got, 1, "after the restore: the stream's records only")
		assert.Equal(t, "restored", string(got[ids[4]].Record))
		tx, err = other.Begin(ctx)
		require.NoError(t, err)
		got, err = tx.LookupRequests(ctx, ids)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		assert.Len(t, got, 1, "the other partition's records are untouched")
	})
}

// InsertRequests finds every stored ID among many, whatever their order: batches of new
// time-ordered IDs, of random IDs, and of both with one stored ID hidden among them, against
// the set of IDs stored so far. The seed is printed.
func TestInsertRequestsFindsStored(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	forEachEngine(t, func(t *testing.T, e *engineEnv) {
		ctx := context.Background()
		r := rand.New(rand.NewPCG(uint64(seed), 1))
		p := openPartition(t, e.open(t), "trips", 0, 0, 0)
		var stored []uuid.UUID
		newID := func() uuid.UUID {
			if r.IntN(2) == 0 {
				return uuid.Must(uuid.NewV7())
			}
			var u uuid.UUID
			for i := range u {
				u[i] = byte(r.UintN(256))
			}
			return u
		}
		for round := range 40 {
			rs := make([]RequestRecord, 1+r.IntN(20))
			for i := range rs {
				rs[i] = RequestRecord{ID: newID(), CreatedAt: baseTime, Record: []byte("r")}
			}
			dup := round > 0 && r.IntN(3) == 0
			if dup {
				rs[r.IntN(len(rs))].ID = stored[r.IntN(len(stored))]
			}
			tx, err := p.Begin(ctx)
			require.NoError(t, err)
			err = tx.InsertRequests(ctx, rs)
			if dup {
				assert.ErrorIs(t, err, ErrDuplicate, "seed %d round %d: a batch holding a stored ID", seed, round)
				require.NoError(t, tx.Rollback())
				continue
			}
			require.NoError(t, err, "seed %d round %d: a batch of new IDs", seed, round)
			require.NoError(t, tx.Commit())
			for _, rec := range rs {
				stored = append(stored, rec.ID)
			}
		}
	})
}
