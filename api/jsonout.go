package api

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/schemaless-db/schemaless/internal/jsontext"
	"github.com/schemaless-db/schemaless/wire"
)

// The hot answers (a cell read, a write's outcome) are written without encoding/json's
// reflection: appendJSON writes them byte for byte as writeJSON's encoder would (HTML escaping
// off, a trailing newline), and TestAppendJSONMatchesEncoder compares the two on random
// values. Every other answer goes through encoding/json.

// jsonBufs holds response buffers for reuse; a buffer that grew past maxPooledJSON is dropped.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledJSON = 64 << 10

// writeFast writes v with appendJSON when it is one of the hot shapes, and reports whether it
// did; the caller then writes nothing else.
func writeFast(w http.ResponseWriter, status int, v any) bool {
	bp := jsonBufs.Get().(*[]byte)
	b, ok := appendJSON((*bp)[:0], v)
	if ok {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}
	if cap(b) <= maxPooledJSON {
		*bp = b[:0]
		jsonBufs.Put(bp)
	}
	return ok
}

// appendJSON appends v's JSON text and a newline to dst, for the shapes it knows: wire.Cell,
// wire.PutResult and wire.PutCellsResponse, as values (the handlers pass them so). ok is false
// for any other value, pointers included, and for one encoding/json would refuse (a created_at
// outside years 0 to 9999); it then returns dst as given, though bytes may have been written
// past its length.
func appendJSON(dst []byte, v any) (out []byte, ok bool) {
	switch t := v.(type) {
	case wire.Cell:
		out, ok = appendCell(dst, &t)
	case wire.PutResult:
		out, ok = appendPutResult(dst, &t), true
	case wire.PutCellsResponse:
		out, ok = appendPutCells(dst, &t), true
	default:
		return dst, false
	}
	if !ok {
		return dst, false
	}
	return append(out, '\n'), true
}

// appendCell writes c. Its Body must be compact JSON text (what cells.Body.JSON returns), which
// encoding/json would copy unchanged; it is copied as is.
func appendCell(b []byte, c *wire.Cell) ([]byte, bool) {
	b = appendKey(b, c.RowKey, c.ColumnKey, c.RefKey)
	if len(c.Body) > 0 {
		b = append(b, `,"body":`...)
		b = append(b, c.Body...)
	}
	if len(c.Stored) > 0 {
		b = append(b, `,"stored":`...)
		b = jsontext.AppendBytes(b, c.Stored)
	}
	b = append(b, `,"added_id":`...)
	b = strconv.AppendInt(b, c.AddedID, 10)
	b = append(b, `,"created_at":`...)
	b, ok := jsontext.AppendTime(b, c.CreatedAt)
	if !ok {
		return b, false
	}
	if c.Erased {
		b = append(b, `,"erased":true`...)
	}
	if c.Origin != "" {
		b = append(b, `,"origin":`...)
		b = jsontext.AppendString(b, c.Origin)
	}
	return append(b, '}'), true
}

// appendKey opens an answer's object with the fields of a cell's key, the first three of both
// wire.Cell and wire.PutResult.
func appendKey(b []byte, row, col string, ref int64) []byte {
	b = append(b, `{"row_key":`...)
	b = jsontext.AppendString(b, row)
	b = append(b, `,"column_key":`...)
	b = jsontext.AppendString(b, col)
	b = append(b, `,"ref_key":`...)
	return strconv.AppendInt(b, ref, 10)
}

func appendPutResult(b []byte, r *wire.PutResult) []byte {
	b = appendKey(b, r.RowKey, r.ColumnKey, r.RefKey)
	b = append(b, `,"status":`...)
	b = jsontext.AppendString(b, r.Status)
	b = append(b, `,"added_id":`...)
	b = strconv.AppendInt(b, r.AddedID, 10)
	return append(b, '}')
}

func appendPutCells(b []byte, r *wire.PutCellsResponse) []byte {
	if r.Results == nil {
		return append(b, `{"results":null}`...)
	}
	b = append(b, `{"results":[`...)
	for i := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPutResult(b, &r.Results[i])
	}
	return append(b, "]}"...)
}
