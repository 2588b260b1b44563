package command_test

import (
	"fmt"
	"testing"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// request returns a plain write of 8 cells over shards 1 to 4, interleaved as a client's batch
// is, and its outcome: cell i created with added_id 100+i.
func request(t *testing.T) (command.Write, command.WriteResult) {
	w := command.Write{ID: id}
	var r command.WriteResult
	for i, shard := range []int{1, 3, 2, 4, 1, 3, 4, 2} {
		w.Cells = append(w.Cells, command.Cell{Shard: shard, Key: cells.Key{RowKey: row, ColumnKey: fmt.Sprintf("C%d", i), RefKey: 1},
			Body: cells.Body(fmt.Sprintf(`{"i":%d}`, i))})
		r.Cells = append(r.Cells, cells.Result{Status: cells.StatusCreated, AddedID: int64(100 + i), CreatedAt: at})
	}
	return w, r
}

// share returns the cells of w in shards, in w's order (what a node sends a partition that
// holds those shards), and their indexes in w.
func share(w command.Write, shards ...int) (command.Write, []int) {
	out := command.Write{ID: w.ID}
	var idx []int
	for i, c := range w.Cells {
		for _, s := range shards {
			if c.Shard == s {
				out.Cells = append(out.Cells, c)
				idx = append(idx, i)
			}
		}
	}
	return out, idx
}

// resultOf returns the results of r's cells idx, as the outcome of the share they make.
func resultOf(r command.WriteResult, idx []int) command.WriteResult {
	var out command.WriteResult
	for _, i := range idx {
		out.Cells = append(out.Cells, r.Cells[i])
	}
	return out
}

// recordRoundTrip encodes and decodes rec, as the state machine stores and reads it.
func recordRoundTrip(t *testing.T, rec command.Record) command.Record {
	b, err := command.EncodeRecord(&rec)
	require.NoError(t, err)
	got, err := command.DecodeRecord(b)
	require.NoError(t, err)
	return got
}

func TestRecordAnswersTheSameWrite(t *testing.T) {
	w, r := request(t)
	rec := recordRoundTrip(t, command.NewRecord(&w, &r))
	got := answer(t, &rec, &w)
	assert.True(t, got.Replayed, "replayed")
	assert.False(t, got.KeyReused, "not a reused key")
	assert.Equal(t, r.Cells, got.Cells, "the recorded results")

	other := w
	other.Cells = append([]command.Cell(nil), w.Cells...)
	other.Cells[5].Body = cells.Body(`{"i":"changed"}`)
	assert.True(t, answer(t, &rec, &other).KeyReused, "a changed body is another request")
	more := w
	more.Cells = append(append([]command.Cell(nil), w.Cells...), command.Cell{Shard: 5, Key: cells.Key{RowKey: row, ColumnKey: "X", RefKey: 1}, Body: cells.Body(`{}`)})
	assert.True(t, answer(t, &rec, &more).KeyReused, "a cell in a shard the record does not hold")
}

// TestRecordAnswersAfterSplit: a split copies the record into both halves; each then gets the
// share of its own shards and answers it with the recorded results of those cells.
func TestRecordAnswersAfterSplit(t *testing.T) {
	w, r := request(t)
	rec := recordRoundTrip(t, command.NewRecord(&w, &r))
	for _, half := range [][]int{{1, 2}, {3, 4}, {4}} {
		sub, idx := share(w, half...)
		got := answer(t, &rec, &sub)
		require.False(t, got.KeyReused, "shards %v: not a reused key", half)
		assert.True(t, got.Replayed, "shards %v: replayed", half)
		require.Len(t, got.Cells, len(idx), "shards %v", half)
		for j, i := range idx {
			assert.Equal(t, r.Cells[i], got.Cells[j], "shards %v: cell %d of the share, %d of the request", half, j, i)
		}
		changed, _ := share(w, half...)
		changed.Cells = append([]command.Cell(nil), changed.Cells...)
		changed.Cells[len(changed.Cells)-1].Key.RefKey++
		assert.True(t, answer(t, &rec, &changed).KeyReused, "shards %v: another cell", half)
		fewer := sub
		fewer.Cells = sub.Cells[:len(sub.Cells)-1]
		assert.True(t, answer(t, &rec, &fewer).KeyReused, "shards %v: a cell left out", half)
	}
}

// TestJoinedRecordAnswersAfterMerge: a request whose shares went to two partitions left a
// record of the same ID in each; the merge joins them and the merged partition answers the
// whole request, interleaved as the client sent it.
func TestJoinedRecordAnswersAfterMerge(t *testing.T) {
	w, r := request(t)
	left, li := share(w, 1, 2)
	right, ri := share(w, 3, 4)
	lr, rr := resultOf(r, li), resultOf(r, ri)
	lrec, rrec := command.NewRecord(&left, &lr), command.NewRecord(&right, &rr)
	la, err := command.EncodeRecord(&lrec)
	require.NoError(t, err)
	ra, err := command.EncodeRecord(&rrec)
	require.NoError(t, err)

	assert.True(t, answer(t, &lrec, &w).KeyReused, "before the merge, one share's record does not answer the whole request")
	joined, err := command.JoinRecords(la, ra)
	require.NoError(t, err)
	rec, err := command.DecodeRecord(joined)
	require.NoError(t, err)
	require.Len(t, rec.Parts, 2, "parts")
	got := answer(t, &rec, &w)
	require.False(t, got.KeyReused, "the joined record answers the whole request")
	assert.Equal(t, r.Cells, got.Cells, "every cell's recorded result, in the request's order")

	same, err := command.JoinRecords(la, la)
	require.NoError(t, err)
	assert.Equal(t, la, same, "a split's two copies of one record join into that record")
}

// TestRecordViolationAfterSplit: a share refused by a schema refuses each half's retry; the
// half with the violating cell names it by its index in the half.
func TestRecordViolationAfterSplit(t *testing.T) {
	w, _ := request(t)
	r := command.WriteResult{Violation: &schemas.CellViolation{Cell: 5, Column: "C5", Version: 1, Message: "type"}} // shard 3, its 2nd cell
	rec := recordRoundTrip(t, command.NewRecord(&w, &r))
	with, _ := share(w, 3, 4)
	got := answer(t, &rec, &with)
	require.NotNil(t, got.Violation, "the half with the violating cell")
	assert.Equal(t, 2, got.Violation.Cell, "index of the violating cell in the half (shards 3 4: cells 1 3 5 6)")
	assert.Empty(t, got.Cells, "nothing written")
	without, _ := share(w, 1, 2)
	got = answer(t, &rec, &without)
	require.NotNil(t, got.Violation, "the half without the violating cell is refused too")
	assert.Equal(t, -1, got.Violation.Cell, "its cell went to another partition")
}

func TestRecordAtomicAndEarlierLayout(t *testing.T) {
	w := atomicWrite(t)
	w.Cells = append(w.Cells, command.Cell{Shard: 8, Key: cells.Key{RowKey: id, ColumnKey: "BASE", RefKey: 1}, Body: cells.Body(`{}`)})
	r := command.WriteResult{Failed: []command.ConditionFailure{{Index: 0, LatestRefKey: 3, Found: true}}}
	rec := recordRoundTrip(t, command.NewRecord(&w, &r))
	got := answer(t, &rec, &w)
	assert.Equal(t, r.Failed, got.Failed, "an atomic write's retry gets its outcome")
	sub := w
	sub.Cells = w.Cells[:1]
	assert.True(t, answer(t, &rec, &sub).KeyReused, "an atomic write is answered only whole")

	plain, pr := request(t)
	legacy := command.Record{Fingerprint: plain.Fingerprint(), Parts: []command.RecordPart{{Result: pr}}}
	assert.Equal(t, pr.Cells, answer(t, &legacy, &plain).Cells, "a record of the earlier layout answers the same write")
	half, _ := share(plain, 1, 2)
	assert.True(t, answer(t, &legacy, &half).KeyReused, "but not a share of it: it holds no shards")
}

// answer is rec.Answer(w) for a write that is not fresh.
func answer(t *testing.T, rec *command.Record, w *command.Write) command.WriteResult {
	t.Helper()
	out, fresh := rec.Answer(w)
	require.False(t, fresh, "a write the record holds shards of is not fresh")
	return out
}

// TestRecordFreshShare: a split copied the parent's record of one share of a request into the
// right half; the request's other share, routed by a newer catalog, reaches the right half,
// whose copy holds none of its shards: it is applied (fresh) and added to the record, which
// then answers both shares, and a share that overlaps the record only in part is a reused key.
func TestRecordFreshShare(t *testing.T) {
	w, r := request(t)
	left, li := share(w, 1, 2)
	right, ri := share(w, 3, 4)
	lr, rr := resultOf(r, li), resultOf(r, ri)
	rec := recordRoundTrip(t, command.NewRecord(&left, &lr))
	_, fresh := rec.Answer(&right)
	require.True(t, fresh, "a share in shards the record does not hold")
	rec = recordRoundTrip(t, rec.Extend(&right, &rr))
	assert.Equal(t, lr.Cells, answer(t, &rec, &left).Cells, "the first share, replayed")
	assert.Equal(t, rr.Cells, answer(t, &rec, &right).Cells, "the added share, replayed")
	assert.Equal(t, r.Cells, answer(t, &rec, &w).Cells, "the whole request, replayed")

	mixed, _ := share(w, 2, 3)
	only := recordRoundTrip(t, command.NewRecord(&left, &lr))
	assert.True(t, answer(t, &only, &mixed).KeyReused, "shards held in part: a reused key")
	atomic := right
	atomic.Atomic = true
	_, fresh = only.Answer(&atomic)
	assert.False(t, fresh, "an atomic write is never fresh")
}
