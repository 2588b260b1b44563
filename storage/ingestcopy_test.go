package storage

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cutRecords stores records of ids in a new partition and cuts its request records' key range
// into 4 (cutKeyRange); the snapshot it read closes with the test.
func cutRecords(t *testing.T, ids []uuid.UUID) (snap *SnapshotTx, whole keyRange, parts []keyRange) {
	s := pebbleEnv(t).open(t)
	p := openPartition(t, s, "cut", 0, 0, 7)
	putRecords(t, p, ids, time.Now(), "cut")
	snap, err := p.BeginSnapshot(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = snap.Close() })
	whole = requestKeyRanges(snap)[0]
	parts, err = cutKeyRange(snap, whole, 4)
	require.NoError(t, err)
	return snap, whole, parts
}

// cutKeyRange cuts the request records of a partition into parts that cover every record
// once, in order, and that divide time-ordered IDs (the Go client's) as well as random ones.
func TestCutKeyRange(t *testing.T) {
	base := time.Now().UnixMilli()
	for _, c := range []struct {
		name string
		id   func(i int) uuid.UUID
	}{{"time-ordered IDs", func(i int) uuid.UUID { return v7At(base + int64(i/100)) }}, {"random IDs", func(int) uuid.UUID { return uuid.New() }}} {
		t.Run(c.name, func(t *testing.T) {
			ids := make([]uuid.UUID, 2000)
			for i := range ids {
				ids[i] = c.id(i) // time-ordered IDs: 100 a millisecond over 20 ms, as a partition's
			}
			snap, whole, parts := cutRecords(t, ids)
			require.Len(t, parts, 4)
			assert.Equal(t, whole.from, parts[0].from, "the first part starts where the range does")
			assert.Equal(t, whole.to, parts[3].to, "the last part ends where the range does")
			for i := 1; i < len(parts); i++ {
				assert.Equal(t, parts[i-1].to, parts[i].from, "part %d starts where part %d ends", i, i-1)
				assert.Negative(t, bytes.Compare(parts[i].from, parts[i].to), "part %d is not empty as a range", i)
			}
			var all [][]byte
			require.NoError(t, eachKeyIn(snap, whole, func(rel, _ []byte) error { all = append(all, bytes.Clone(rel)); return nil }))
			require.Len(t, all, len(ids))
			var got [][]byte
			for i, kr := range parts {
				n := 0
				require.NoError(t, eachKeyIn(snap, kr, func(rel, _ []byte) error { got = append(got, bytes.Clone(rel)); n++; return nil }))
				assert.Greater(t, n, len(ids)/20, "part %d holds a share of the records", i)
			}
			assert.Equal(t, all, got, "the parts hold every record once, in order")
		})
	}
	// A range with one key is not cut.
	_, whole, parts := cutRecords(t, newIDs(1))
	assert.Equal(t, []keyRange{whole}, parts, "one key: the range whole")
}

// v7At returns a version 7 UUID (RFC 9562) of Unix time ms: its first 48 bits the time, the
// rest random. Written by the clock, the IDs of a test spread as its goroutine was scheduled
// (a stall on a loaded machine left one part of a cut with few records).
func v7At(ms int64) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	for i := range 6 {
		id[i] = byte(ms >> (8 * (5 - i)))
	}
	return id
}
