package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

// encoderJSON is writeJSON's encoding/json path for v.
func encoderJSON(t *testing.T, v any) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return buf.String()
}

func randomText(r *rand.Rand) string {
	pieces := []string{"a", "trip", "-", "\"", "\\", "<&>", "\n", "\x01", "é", "\u2028", "\xff", "😀"}
	var b []byte
	for n := r.IntN(6); n > 0; n-- {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

// randomBody returns compact JSON text, as cells.Body.JSON returns it, or nothing.
func randomBody(r *rand.Rand) json.RawMessage {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return json.RawMessage(`{}`)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{randomText(r): randomText(r), "n": r.Int64(), "f": r.Float64(), "a": []any{true, nil}})
	return json.RawMessage(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func randomCell(r *rand.Rand) wire.Cell {
	c := wire.Cell{RowKey: randomText(r), ColumnKey: randomText(r), RefKey: r.Int64() - r.Int64(), Body: randomBody(r),
		AddedID: r.Int64N(1 << 40), CreatedAt: time.Unix(r.Int64N(4e9), r.Int64N(1e9)).UTC(), Erased: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		c.Origin = randomText(r)
	}
	if r.IntN(3) == 0 {
		c.Stored = make([]byte, r.IntN(40))
		for i := range c.Stored {
			c.Stored[i] = byte(r.Uint32())
		}
	}
	return c
}

func randomPutResult(r *rand.Rand) wire.PutResult {
	return wire.PutResult{RowKey: randomText(r), ColumnKey: randomText(r), RefKey: r.Int64() - r.Int64(),
		Status: []string{"created", "exists", "buffered", randomText(r)}[r.IntN(4)], AddedID: r.Int64N(1 << 40)}
}

// TestAppendJSONMatchesEncoder checks that the hot answers written without reflection are
// byte for byte what encoding/json writes, on random values (the seed is printed).
func TestAppendJSONMatchesEncoder(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 2))
	check := func(v any) bool {
		got, ok := appendJSON(nil, v)
		require.True(t, ok, "%T", v)
		return assert.Equal(t, encoderJSON(t, v), string(got), "%#v", v)
	}
	for i := 0; i < 3000; i++ {
		c := randomCell(r)
		p := randomPutResult(r)
		res := wire.PutCellsResponse{}
		if r.IntN(5) > 0 {
			res.Results = make([]wire.PutResult, r.IntN(4))
			for j := range res.Results {
				res.Results[j] = randomPutResult(r)
			}
		}
		if !check(c) || !check(p) || !check(res) {
			return
		}
	}
}

// TestWriteJSONFallsBack checks that a shape appendJSON does not know, and a cell time that
// encoding/json refuses, go through encoding/json.
func TestWriteJSONFallsBack(t *testing.T) {
	_, ok := appendJSON(nil, wire.GetCellsResponse{})
	assert.False(t, ok)
	_, ok = appendJSON(nil, (*wire.Cell)(nil))
	assert.False(t, ok, "a pointer goes through encoding/json")
	bad := wire.Cell{RowKey: "r", CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	_, ok = appendJSON(nil, bad)
	assert.False(t, ok, "a year past 9999 is refused by encoding/json, so not written here")

	rec := httptest.NewRecorder()
	writeJSON(rec, 201, wire.PutResult{RowKey: "r", Status: "created", AddedID: 7})
	assert.Equal(t, 201, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, `{"row_key":"r","column_key":"","ref_key":0,"status":"created","added_id":7}`+"\n", rec.Body.String())
	assert.Equal(t, strconv.Itoa(rec.Body.Len()), rec.Header().Get("Content-Length"))
}

func BenchmarkWriteCell(b *testing.B) {
	c := wire.Cell{RowKey: "0b6f4a1e-8f2c-4d55-9a53-0c3b7e1d2f10", ColumnKey: "TRIP", RefKey: 3,
		Body:    json.RawMessage(`{"carrier":"AA","dest":"LAX","distance":2475,"flight":1,"origin":"JFK"}`),
		AddedID: 123456, CreatedAt: time.Date(2026, 11, 27, 17, 0, 0, 123456000, time.UTC)}
	for _, fast := range []bool{false, true} {
		name := "encoding-json"
		if fast {
			name = "append"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				if !fast || !writeFast(rec, 200, c) {
					rec.Header().Set("Content-Type", "application/json")
					rec.WriteHeader(200)
					enc := json.NewEncoder(rec)
					enc.SetEscapeHTML(false)
					_ = enc.Encode(c)
				}
			}
		})
	}
}
