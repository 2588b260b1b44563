package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/schemaless-db/schemaless/cells"
)

// Kinds of body FuzzDecodeRequest decodes (its first argument, modulo 3).
const (
	fuzzPutCells = iota
	fuzzGetCells
	fuzzTransaction
)

// FuzzDecodeRequest feeds arbitrary bodies to the decoders of put_cells, batch get and
// transactions, as the handlers do (readBody, then the decoder). They must never panic; a body
// they refuse gets a 4xx with a code; a body they accept gives keys that parse, within the
// batch limit, and cell bodies that decode back to a JSON object. Its seed corpus runs with
// every `go test`; `make test` also fuzzes it for a bounded time.
func FuzzDecodeRequest(f *testing.F) {
	row := "0190b2a4-7c1e-7d3a-9f6b-2c4d5e6f7a8b"
	for _, seed := range []struct {
		kind uint8
		body string
	}{
		{fuzzPutCells, `{"cells":[{"row_key":"` + row + `","column_key":"BASE","ref_key":1,"body":{"fare":10.5,"city":"SF"}}]}`},
		{fuzzPutCells, `{"cells":[{"row_key":"` + row + `","column_key":"STATUS","ref_key":9223372036854775807,"body":{"a":[1,2,{"b":null}],"n":1e400}}]}`},
		{fuzzPutCells, `{"cells":[]}`},
		{fuzzPutCells, `{"cells":[{"row_key":"` + row + `","column_key":"BASE","ref_key":"1","body":{}}]}`},
		{fuzzPutCells, `{"cells":[{"row_key":"` + row + `","column_key":"BASE","ref_key":1.5,"body":[]}]} trailing`},
		{fuzzPutCells, `{"cells":[{"row_key":"` + row + `","column_key":"B\u00e9","ref_key":-1,"body":{"x":"\ud800"}}],"extra":1}`},
		{fuzzGetCells, `{"keys":[{"row_key":"` + row + `","column_key":"BASE","ref_key":3},{"row_key":"` + row + `","column_key":"BASE"}]}`},
		{fuzzGetCells, `{"keys":[{"row_key":"` + row + `","column_key":"BASE","ref_key":null}]}`},
		{fuzzGetCells, `{"keys":null}`},
		{fuzzTransaction, `{"conditions":[{"row_key":"` + row + `","column_key":"BAL","latest_ref_key":4}],"writes":[{"row_key":"` + row + `","column_key":"BAL","ref_key":5,"body":{"balance":90}}]}`},
		{fuzzTransaction, `{"conditions":[{"row_key":"` + row + `","column_key":"BAL","latest_ref_key":null}],"writes":[{"row_key":"` + row + `","column_key":"BAL","ref_key":0,"body":{"balance":100}}]}`},
		{fuzzTransaction, `{"writes":[]}`},
		{fuzzTransaction, "{\"writes\":[{\"row_key\":\"" + row + "\",\"column_key\":\"X\",\"ref_key\":1,\"body\":{\"k\":\"\xff\"}}]}"},
	} {
		f.Add(seed.kind, []byte(seed.body))
	}
	cfg := DefaultConfig()
	cfg.MaxBatchCells, cfg.MaxCellBodyBytes, cfg.MaxRequestBytes, cfg.MaxTransactionConditions = 8, 2048, 16<<10, 8
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/trips/cells", bytes.NewReader(body))
		raw, he := readBody(r, cfg.MaxRequestBytes, "body")
		if he != nil {
			checkRefusal(t, he)
			return
		}
		if !utf8.Valid(raw) {
			t.Fatalf("readBody accepted invalid UTF-8: %q", raw)
		}
		switch kind % 3 {
		case fuzzPutCells:
			cs, origin, _, he := decodePutCells(raw, &cfg)
			if he != nil {
				checkRefusal(t, he)
				return
			}
			if origin != "" && cells.ValidateClusterName("origin", origin) != nil {
				t.Fatalf("decodePutCells accepted origin %q", origin)
			}
			checkCells(t, cs, cfg)
		case fuzzGetCells:
			keys, given, he := decodeGetCells(raw, &cfg)
			if he != nil {
				checkRefusal(t, he)
				return
			}
			if len(keys) > cfg.MaxBatchCells || len(given) != len(keys) {
				t.Fatalf("got %d keys and %d given, want as many, at most %d", len(keys), len(given), cfg.MaxBatchCells)
			}
			for i, k := range keys {
				checkKey(t, k.Key)
				if k.Latest != (given[i].RefKey == nil) {
					t.Fatalf("key %d: latest %v, but the given ref key is %v", i, k.Latest, given[i].RefKey)
				}
			}
		case fuzzTransaction:
			conds, cs, he := decodeTransaction(raw, &cfg)
			if he != nil {
				checkRefusal(t, he)
				return
			}
			if len(cs) == 0 || len(conds) > cfg.MaxTransactionConditions {
				t.Fatalf("got %d writes and %d conditions, want at least one write and at most %d conditions", len(cs), len(conds), cfg.MaxTransactionConditions)
			}
			checkCells(t, cs, cfg)
			for _, c := range conds {
				checkKey(t, cells.Key{RowKey: c.RowKey, ColumnKey: c.ColumnKey, RefKey: c.LatestRefKey})
			}
		}
	})
}

// checkRefusal checks a refused body's answer: a 4xx with a code, and a message that begins
// with the field it names.
func checkRefusal(t *testing.T, he *httpError) {
	t.Helper()
	if he.status < 400 || he.status > 499 || he.code == "" {
		t.Fatalf("refusal %d %q (%s), want a 4xx with a code", he.status, he.code, he.msg)
	}
	if he.field != "" && !strings.HasPrefix(he.msg, he.field) {
		t.Fatalf("refusal naming field %q: message %q does not begin with it", he.field, he.msg)
	}
}

// checkCells checks accepted cells: at most MaxBatchCells, valid keys, bodies that are JSON
// objects.
func checkCells(t *testing.T, cs []cells.Cell, cfg Config) {
	t.Helper()
	if len(cs) > cfg.MaxBatchCells {
		t.Fatalf("got %d cells, want at most %d", len(cs), cfg.MaxBatchCells)
	}
	for i, c := range cs {
		checkKey(t, c.Key)
		text, err := c.Body.JSON()
		if err != nil {
			t.Fatalf("cell %d: the accepted body does not decode: %v", i, err)
		}
		var obj map[string]any
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() || !utf8.Valid(text) {
			t.Fatalf("cell %d: body %q is not a JSON object in valid UTF-8 (%v)", i, text, err)
		}
	}
}

// checkKey checks a key as the backend expects it: a row key that prints and parses back,
// a valid column key, a non-negative ref key.
func checkKey(t *testing.T, k cells.Key) {
	t.Helper()
	if back, err := cells.ParseRowKey(k.RowKey.String()); err != nil || back != k.RowKey {
		t.Fatalf("row key %s does not round-trip: %v", k.RowKey, err)
	}
	if err := cells.ValidateColumnKey(k.ColumnKey); err != nil {
		t.Fatalf("column key %q: %v", k.ColumnKey, err)
	}
	if k.RefKey < 0 {
		t.Fatalf("ref key %d, want >= 0", k.RefKey)
	}
}
