package command_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/command"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/indexes"
	"github.com/schemaless-db/schemaless/schemas"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	at  = time.Date(2026, 11, 27, 12, 0, 0, 123456000, time.UTC)
	row = uuid.MustParse("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
	id  = uuid.MustParse("01890a5d-ac96-774b-bcce-b302099a8057")
)

func body(t *testing.T) cells.Body {
	t.Helper()
	b, err := cells.EncodeBody([]byte(`{"origin":"SFO","distance":2586}`))
	require.NoError(t, err)
	return b
}

func atomicWrite(t *testing.T) command.Write {
	cell := command.Cell{Shard: 7, Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 3}, Body: body(t)}
	return command.Write{ID: id, Atomic: true, Conditions: []command.Condition{
		{Shard: 7, RowKey: row, ColumnKey: "STATUS", LatestRefKey: 2},
		{Shard: 7, RowKey: row, ColumnKey: "X", None: true},
	}, Cells: []command.Cell{cell}}
}

// golden returns the commands whose encodings testdata/<name>.hex pins: the bytes every
// build has written to raft logs, which every later build must read.
func golden(t *testing.T) map[string]command.Command {
	b := body(t)
	cell := command.Cell{Shard: 7, Key: cells.Key{RowKey: row, ColumnKey: "BASE", RefKey: 3}, Body: b}
	return map[string]command.Command{
		"append-v1": &command.Append{CreatedAt: at, Writes: []command.Write{{Cells: []command.Cell{cell,
			{Shard: 9, Key: cells.Key{RowKey: id, ColumnKey: "STATUS", RefKey: 1 << 40}, Body: b}}}}},
		"append-v6": &command.Append{CreatedAt: at, Writes: []command.Write{atomicWrite(t), {Cells: []command.Cell{cell}}}},
		"append-origin": &command.Append{CreatedAt: at, Writes: []command.Write{{Cells: []command.Cell{cell}, Origin: "west"},
			{ID: id, Cells: []command.Cell{cell}}}},
		"group": &command.Group{Group: "billing", CreatedAt: at, Cmd: consumer.Command{Op: consumer.OpHeartbeat, Worker: "w1",
			Shards: 64, SessionTimeout: 10 * time.Second, HaltThreshold: 5}},
		"index": &command.Index{Op: command.IndexUpsert, CreatedAt: at, Table: "idx_by_origin_v1",
			Fields:  []indexes.Field{{Name: "origin", Type: indexes.TypeString}, {Name: "trip", Type: indexes.TypeUUID}, {Name: "distance", Type: indexes.TypeInt}},
			Entries: []command.IndexEntry{{Shard: 3, RowKey: row, Values: []any{"SFO", id, int64(2586)}, Refs: map[string]int64{"BASE": 3}}}},
		"index-erase":  &command.Index{Op: command.IndexErase, CreatedAt: at, Table: "idx_by_origin_v1", Entries: []command.IndexEntry{}, RowKeys: []uuid.UUID{row, id}},
		"schema":       &command.Schema{CreatedAt: at, Column: "BASE", Version: 2, Text: []byte(`{"type":"object"}`)},
		"erase":        &command.Erase{CreatedAt: at, Shard: 7, RowKey: row},
		"erase-origin": &command.Erase{CreatedAt: at, Shard: 7, RowKey: row, Origin: "west"},
		"split":        &command.Split{AtShard: 6, Right: 3, Generation: 12, Voters: []command.Voter{{ID: "n1", Addr: "127.0.0.1:7170"}, {ID: "n2", Addr: "127.0.0.1:7171"}}},
		"freeze":       &command.Freeze{Into: 2, Generation: 14},
		"thaw":         &command.Freeze{Into: 2, Generation: 14, Thaw: true},
		"merge":        &command.Merge{Right: 3, First: 6, Last: 9, FrozenAt: 4711, Shards: 64, Generation: 15},
	}
}

func readHex(t *testing.T, name string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name+".hex"))
	require.NoError(t, err)
	b, err := hex.DecodeString(strings.TrimSpace(string(text)))
	require.NoError(t, err)
	return b
}

// TestGolden decodes the pinned bytes of every kind into the command they were made from, and
// encodes that command back into the same bytes.
func TestGolden(t *testing.T) {
	for name, want := range golden(t) {
		t.Run(name, func(t *testing.T) {
			data := readHex(t, name)
			got, err := command.Decode(data)
			require.NoError(t, err)
			assert.Equal(t, want, got, "decoded %s", name)
			enc, err := command.Encode(want)
			require.NoError(t, err)
			assert.Equal(t, hex.EncodeToString(data), hex.EncodeToString(enc), "encoding of %s changed: raft logs written before would read differently", name)
		})
	}
	assert.Equal(t, command.KindCells, command.KindOf(readHex(t, "append-v1")))
	assert.Equal(t, command.KindAppend, command.KindOf(readHex(t, "append-v6")))
	assert.Equal(t, command.KindAppendOrigin, command.KindOf(readHex(t, "append-origin")))
	assert.Equal(t, command.KindEraseOrigin, command.KindOf(readHex(t, "erase-origin")))
	assert.Equal(t, command.KindErase, command.KindOf(readHex(t, "erase")))
}

// TestAppendOrigin: an origin changes the layout only when a write carries one, enters the
// fingerprint only when set, and Validate names the write of a bad origin.
func TestAppendOrigin(t *testing.T) {
	w := atomicWrite(t)
	local, err := command.Encode(&command.Append{CreatedAt: at, Writes: []command.Write{w}})
	require.NoError(t, err)
	assert.Equal(t, command.KindAppend, command.KindOf(local), "no origin: the layout older builds read")
	fromWest := w
	fromWest.Origin = "west"
	assert.NotEqual(t, w.Fingerprint(), fromWest.Fingerprint(), "the origin is part of what a write asks")
	enc, err := command.Encode(&command.Append{CreatedAt: at, Writes: []command.Write{w, fromWest}})
	require.NoError(t, err)
	got, err := command.Decode(enc)
	require.NoError(t, err)
	a := got.(*command.Append)
	require.Len(t, a.Writes, 2)
	assert.Equal(t, "", a.Writes[0].Origin)
	assert.Equal(t, "west", a.Writes[1].Origin)
	assert.NoError(t, a.Validate())
	a.Writes[1].Origin = "West!"
	err = a.Validate()
	require.ErrorIs(t, err, cells.ErrInvalidClusterName)
	assert.Contains(t, err.Error(), "writes[1].origin")
}

// TestFingerprintPinned: request records store fingerprints, so a build that hashed a write
// differently would refuse a retry across an upgrade as a reused key.
func TestFingerprintPinned(t *testing.T) {
	w := atomicWrite(t)
	assert.Equal(t, uint64(0xfdd33670643c3d0d), w.Fingerprint())
	plain := command.Write{Cells: w.Cells}
	assert.Equal(t, uint64(0x796e37b223ff1c9a), plain.Fingerprint())
	other := atomicWrite(t)
	other.Conditions[1].None = false
	assert.NotEqual(t, w.Fingerprint(), other.Fingerprint(), "a changed condition changes the fingerprint")
}

// TestRecordPinned: records outlive a build by RequestWindow, so the layout of the records an
// earlier build wrote (v1: one outcome, no shards) still decodes, and the current one is pinned.
func TestRecordPinned(t *testing.T) {
	r := command.WriteResult{Cells: []cells.Result{{Status: cells.StatusCreated, AddedID: 12, CreatedAt: at}, {Status: cells.StatusExists, AddedID: 4}},
		Failed: []command.ConditionFailure{{Index: 1, LatestRefKey: 5, Found: true}}, Conflict: true,
		Violation: &schemas.CellViolation{Cell: 1, Column: "BASE", Version: 2, Pointer: "/date", Message: "missing"}}
	got, err := command.DecodeRecord(readHex(t, "record-v1"))
	require.NoError(t, err)
	assert.Equal(t, command.Record{Fingerprint: 0x1234567890abcdef, Parts: []command.RecordPart{{Result: r}}}, got, "v1")

	w := atomicWrite(t)
	rec := command.NewRecord(&w, &r)
	data := readHex(t, "record-v2")
	got, err = command.DecodeRecord(data)
	require.NoError(t, err)
	assert.Equal(t, rec, got, "v2")
	enc, err := command.EncodeRecord(&rec)
	require.NoError(t, err)
	assert.Equal(t, data, enc, "v2: encoded")
}

func TestResultRoundTrip(t *testing.T) {
	w := command.WriteResult{Cells: []cells.Result{{Status: cells.StatusBuffered, CreatedAt: at}}, Replayed: true, KeyReused: true,
		Violation: &schemas.CellViolation{Cell: 0, Column: "BASE", Version: 1, Message: "type"}}
	roundTrip(t, w)
	roundTrip(t, command.IndexResult{Changed: 3, Catalog: indexes.Result{}})
	roundTrip(t, command.SchemaResult{Status: command.SchemaGap, Latest: 4, Message: "x"})
	roundTrip(t, command.EraseResult{Erased: 2, AddedID: 99})
	roundTrip(t, consumer.Result{Generation: 7, Revoke: []int{1, 2}})

	_, err := command.DecodeResult[command.EraseResult]([]byte{9, 0x90})
	assert.ErrorIs(t, err, command.ErrBadCommand, "an unknown result version")
	_, err = command.DecodeResult[command.WriteResult]([]byte{1, 0xc1})
	assert.ErrorIs(t, err, command.ErrBadCommand, "a body that does not decode")
}

func roundTrip[T command.Result](t *testing.T, r T) {
	t.Helper()
	b, err := command.EncodeResult(r)
	require.NoError(t, err)
	got, err := command.DecodeResult[T](b)
	require.NoError(t, err)
	assert.Equal(t, r, got)
}

func TestDecodeRefuses(t *testing.T) {
	good := readHex(t, "append-v6")
	for name, data := range map[string][]byte{
		"empty":        nil,
		"unknown kind": {0x7f, 0x90},
		"truncated":    good[:len(good)/2],
		"not msgpack":  {byte(command.KindErase), 0xc1},
	} {
		_, err := command.Decode(data)
		assert.ErrorIs(t, err, command.ErrBadCommand, name)
	}
	// A row key of 15 bytes inside a cell.
	a := &command.Append{CreatedAt: at, Writes: []command.Write{{Cells: []command.Cell{{Shard: 1, Key: cells.Key{RowKey: row, ColumnKey: "A", RefKey: 1}}}}}}
	data, err := command.Encode(a)
	require.NoError(t, err)
	i := strings.Index(string(data), string(row[:]))
	require.Positive(t, i)
	bad := append(append(append([]byte{}, data[:i-1]...), 15), data[i:i+15]...)
	bad = append(bad, data[i+16:]...)
	_, err = command.Decode(bad)
	assert.ErrorIs(t, err, command.ErrBadCommand, "a 15-byte row key")

	_, err = command.DecodeAs[*command.Erase](good)
	assert.ErrorIs(t, err, command.ErrBadCommand, "an append read as an erase")
	e, err := command.DecodeAs[*command.Erase](readHex(t, "erase"))
	require.NoError(t, err)
	assert.Equal(t, int32(7), e.Shard)
	_, err = command.Encode(nil)
	assert.ErrorIs(t, err, command.ErrBadCommand)
}

func TestCheckShards(t *testing.T) {
	r := cells.ShardRange{First: 4, Last: 7}
	for name, c := range golden(t) {
		err := c.CheckShards(r)
		switch name {
		case "append-v1":
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "cell 1 is in shard 9")
			assert.ErrorContains(t, err, "write 0 cell 1 names shard 9")
		case "index":
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "entry 0 is in shard 3")
		case "merge":
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "shards 6..9 do not follow 4..7")
		case "group":
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "group billing is coordinated by shard 28 of 64")
		default:
			assert.NoError(t, err, name)
		}
	}
	cond := &command.Append{Writes: []command.Write{{Conditions: []command.Condition{{Shard: 8}}}}}
	assert.ErrorContains(t, cond.CheckShards(r), "write 0 condition 0 names shard 8")
	assert.ErrorIs(t, (&command.Erase{Shard: 3}).CheckShards(r), command.ErrShardOutOfRange)
	// A group command is checked against its coordinator shard among the datastore's shards.
	for _, g := range []string{"billing", "payments", "audit", "search", "rides"} {
		s := consumer.CoordinatorShard(g, 16)
		err := (&command.Group{Group: g, Cmd: consumer.Command{Op: consumer.OpHeartbeat, Shards: 16}}).CheckShards(r)
		if r.Contains(s) {
			assert.NoError(t, err, "group %s coordinated by shard %d of 4..7", g, s)
		} else {
			assert.ErrorIs(t, err, command.ErrShardOutOfRange, "group %s coordinated by shard %d, outside 4..7", g, s)
			assert.ErrorContains(t, err, "group "+g+" names shard")
		}
		assert.NoError(t, (&command.Group{Group: g}).CheckShards(r), "group %s with no shard count", g)
	}
	for _, at := range []int32{4, 8, 0} {
		assert.ErrorIs(t, (&command.Split{AtShard: at}).CheckShards(r), command.ErrShardOutOfRange, "split at %d of 4..7", at)
	}
	assert.NoError(t, (&command.Merge{First: 8, Last: 9}).CheckShards(r), "merge of 8..9 into 4..7")
	for _, m := range [][2]int32{{7, 9}, {9, 10}, {8, 7}, {4, 7}} {
		assert.ErrorIs(t, (&command.Merge{First: m[0], Last: m[1]}).CheckShards(r), command.ErrShardOutOfRange, "merge of %d..%d into 4..7", m[0], m[1])
	}
}

func TestAppendLayouts(t *testing.T) {
	w := atomicWrite(t)
	plain := &command.Append{CreatedAt: at, Writes: []command.Write{{Cells: w.Cells}}}
	data, err := command.Encode(plain)
	require.NoError(t, err)
	assert.Equal(t, command.KindCells, command.KindOf(data), "one plain write keeps the first layout")
	assert.Equal(t, 1, plain.CellCount())
	for _, a := range []*command.Append{
		{CreatedAt: at, Writes: []command.Write{{ID: id, Cells: w.Cells}}},
		{CreatedAt: at, Writes: []command.Write{{Atomic: true, Cells: w.Cells}}},
		{CreatedAt: at, Writes: []command.Write{{Cells: w.Cells}, {Cells: w.Cells}}},
	} {
		data, err := command.Encode(a)
		require.NoError(t, err)
		assert.Equal(t, command.KindAppend, command.KindOf(data))
		got, err := command.Decode(data)
		require.NoError(t, err)
		assert.Equal(t, a, got)
	}
}

// TestRoundTrip: every kind decodes to what was encoded; times come back in UTC, an erase's
// truncated to the microsecond.
func TestRoundTrip(t *testing.T) {
	zone := time.FixedZone("X", 3600)
	e := &command.Erase{CreatedAt: time.Date(2026, 11, 27, 9, 0, 0, 123456789, zone), Shard: 9, RowKey: uuid.New()}
	got, err := command.Decode(mustEncode(t, e))
	require.NoError(t, err)
	ge := got.(*command.Erase)
	assert.Equal(t, e.Shard, ge.Shard)
	assert.Equal(t, e.RowKey, ge.RowKey)
	assert.True(t, ge.CreatedAt.Equal(e.CreatedAt.Truncate(time.Microsecond)) && ge.CreatedAt.Location() == time.UTC,
		"created_at %s, want %s truncated to the microsecond, in UTC", ge.CreatedAt, e.CreatedAt)

	g := &command.Group{Group: "g", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, zone),
		Cmd: consumer.Command{Op: consumer.OpCommit, Worker: "w", Shards: 4, Commits: []consumer.Offset{{Shard: 1, Epoch: 2, Offset: 3}}}}
	got, err = command.Decode(mustEncode(t, g))
	require.NoError(t, err)
	gg := got.(*command.Group)
	assert.Equal(t, g.Cmd, gg.Cmd)
	assert.True(t, gg.CreatedAt.Equal(g.CreatedAt) && gg.CreatedAt.Location() == time.UTC)

	s := &command.Schema{CreatedAt: at, Column: "BASE", Version: 7, Text: []byte(`{}`)}
	got, err = command.Decode(mustEncode(t, s))
	require.NoError(t, err)
	assert.Equal(t, s, got)

	ix := &command.Index{Op: command.IndexCatalog, CreatedAt: at, Catalog: indexes.Command{Op: indexes.OpDefine, Name: "by_origin"}}
	got, err = command.Decode(mustEncode(t, ix))
	require.NoError(t, err)
	assert.Equal(t, ix.Catalog.Name, got.(*command.Index).Catalog.Name)

	bad := &command.Index{Op: command.IndexUpsert, Fields: []indexes.Field{{Name: "n", Type: indexes.TypeInt}},
		Entries: []command.IndexEntry{{Shard: 1, RowKey: row, Values: []any{"not an int"}}}}
	_, err = command.Decode(mustEncode(t, bad))
	assert.ErrorIs(t, err, command.ErrBadCommand, "a value that does not fit its field")
}

func mustEncode(t *testing.T, c command.Command) []byte {
	t.Helper()
	b, err := command.Encode(c)
	require.NoError(t, err)
	return b
}
