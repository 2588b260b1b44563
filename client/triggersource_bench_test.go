package client

// Benchmarks of the per-cell work of a log read, on both sides of the HTTP API, for the cells of
// `schemaless bench` (JSON objects of about 200 bytes), in the two body encodings of a log read:
//
//   - json (body_encoding=json, the API's default): the server turns each stored body into JSON
//     (cells.Body.JSON: inflate, MessagePack decode, JSON encode) and the worker turns it back
//     into the stored form (TriggerSource's triggerCell: cells.EncodeBody, JSON decode,
//     MessagePack encode, deflate).
//   - stored (what workers ask for): the stored form travels as base64 and neither side
//     re-encodes it.
//
// They split the cost behind the log-read figures of BENCHMARKS.md:
//
//	go test -run '^$' -bench 'BodyJSON|EncodePage|DecodePage|ToCell' -benchmem ./client/
//
// The setup checks with require; the timed loops check with a plain if and b.Fatal, because a
// require call costs about 100 ns (it calls b.Helper on every call), which would count in the
// ns/op measured (the stored-form conversion takes 28 ns).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/stretchr/testify/require"
)

// benchPageCells is the cells per page of the page benchmarks: the default BatchSize.
const benchPageCells = 200

func benchJSONBody(i int) []byte {
	head := fmt.Sprintf(`{"origin":"SFO","destination":"JFK","distance":%d,"delay":%d,"pad":"`, 100+i%2900, i%200-20)
	return []byte(head + strings.Repeat("x7q", (200-len(head)-2)/3) + `"}`)
}

// benchWirePage returns a page of benchPageCells cells as the server sends it, with JSON
// bodies or stored ones.
func benchWirePage(b *testing.B, stored bool) wire.ShardsCellsResponse {
	b.Helper()
	page := wire.ShardCellsResponse{Shard: 3, NextLocation: benchPageCells, HighWater: 10 * benchPageCells}
	now := time.Now().UTC()
	for i := 0; i < benchPageCells; i++ {
		body, err := cells.EncodeBody(benchJSONBody(i))
		require.NoError(b, err, "encode body %d", i)
		c := wire.Cell{RowKey: uuid.NewString(), ColumnKey: "BASE", RefKey: 1, AddedID: int64(i + 1), CreatedAt: now}
		if stored {
			c.Stored = body
		} else {
			c.Body, err = body.JSON()
			require.NoError(b, err, "body %d as JSON", i)
		}
		page.Cells = append(page.Cells, c)
	}
	return wire.ShardsCellsResponse{Shards: []wire.ShardCellsResponse{page}}
}

func reportCells(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "cells/s")
}

var benchEncodings = []struct {
	name   string
	stored bool
}{{"json", false}, {"stored", true}}

// BenchmarkBodyJSON is the server's per-cell body work in a log read with JSON bodies
// (api.toAPICell); stored bodies skip it.
func BenchmarkBodyJSON(b *testing.B) {
	body, err := cells.EncodeBody(benchJSONBody(7))
	require.NoError(b, err, "encode body")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := body.JSON(); err != nil {
			b.Fatal(err)
		}
	}
	reportCells(b, 1)
}

// BenchmarkEncodePage is the server's encoding of a page of 200 cells whose bodies are ready
// (api.writeJSON: encoding/json compacts every json.RawMessage, base64-encodes every []byte).
func BenchmarkEncodePage(b *testing.B) {
	for _, e := range benchEncodings {
		b.Run(e.name, func(b *testing.B) {
			resp := benchWirePage(b, e.stored)
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				enc := json.NewEncoder(&buf)
				enc.SetEscapeHTML(false)
				if err := enc.Encode(resp); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(buf.Len()))
			reportCells(b, benchPageCells)
		})
	}
}

// BenchmarkDecodePage is the client's decoding of a page of 200 cells (client.ReadLogs).
func BenchmarkDecodePage(b *testing.B) {
	for _, e := range benchEncodings {
		b.Run(e.name, func(b *testing.B) {
			text, err := json.Marshal(benchWirePage(b, e.stored))
			require.NoError(b, err, "marshal page")
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				var resp wire.ShardsCellsResponse
				if err := json.Unmarshal(text, &resp); err != nil {
					b.Fatal(err)
				}
			}
			reportCells(b, benchPageCells)
		})
	}
}

// BenchmarkToCell is the worker's per-cell conversion before the handler (triggerCell: parse
// the row key; with a JSON body, cells.EncodeBody).
func BenchmarkToCell(b *testing.B) {
	for _, e := range benchEncodings {
		b.Run(e.name, func(b *testing.B) {
			wc := benchWirePage(b, e.stored).Shards[0].Cells[7]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := triggerCell(wc); err != nil {
					b.Fatal(err)
				}
			}
			reportCells(b, 1)
		})
	}
}
