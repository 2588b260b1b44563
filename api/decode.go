package api

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/cluster"
	"github.com/schemaless-db/schemaless/wire"
)

// The decoders of the request bodies that carry cells or keys: put_cells, batch get and
// transactions. Each takes a body readBody returned (valid UTF-8, within its size limit) and
// either refuses it with the 4xx naming the field at fault, or returns keys that parse
// (cells.ParseRowKey, cells.ValidateColumnKey, non-negative ref keys) and bodies that are one
// JSON object each, in their stored form, within the limits of cfg.

// putCellsRequest is wire.PutCellsRequest with raw ref keys, so that a quoted or fractional ref key is
// reported with its position instead of being coerced.
type putCellsRequest struct {
	Cells []struct {
		RowKey    string          `json:"row_key"`
		ColumnKey string          `json:"column_key"`
		RefKey    json.RawMessage `json:"ref_key"`
		Body      json.RawMessage `json:"body"`
	} `json:"cells"`
	Origin string         `json:"origin"`
	Order  *wire.PutOrder `json:"order"`
}

// decodePutCells decodes the body of put_cells into its cells, in request order, its origin
// ("" when absent) and its order (nil when absent; see checkOrder).
func decodePutCells(raw []byte, cfg *Config) ([]cells.Cell, string, *wire.PutOrder, *httpError) {
	var req putCellsRequest
	if he := decodeStrict(raw, &req); he != nil {
		return nil, "", nil, he
	}
	if req.Cells == nil {
		return nil, "", nil, invalid("cells", "is required")
	}
	if req.Origin != "" {
		if err := cells.ValidateClusterName("origin", req.Origin); err != nil {
			return nil, "", nil, invalid("origin", "%q must be 1 to %d bytes of [a-z0-9-], starting with a letter", req.Origin, cells.MaxClusterNameLen)
		}
	}
	if he := checkOrder(req.Order, req.Origin); he != nil {
		return nil, "", nil, he
	}
	if len(req.Cells) > cfg.MaxBatchCells {
		return nil, "", nil, tooLarge("cells", "%d cells, at most %d per request", len(req.Cells), cfg.MaxBatchCells)
	}
	cs := make([]cells.Cell, len(req.Cells))
	for i, pc := range req.Cells {
		c, he := decodeWrite(fmt.Sprintf("cells[%d]", i), pc.RowKey, pc.ColumnKey, pc.RefKey, pc.Body, cfg)
		if he != nil {
			return nil, "", nil, he
		}
		cs[i] = c
	}
	return cs, req.Origin, req.Order, nil
}

// maxOrderStream is the longest wire.PutOrder.Stream, in bytes.
const maxOrderStream = 64

// checkOrder checks a put_cells request's order (nil: none): only with an origin, a stream of
// 1 to maxOrderStream bytes of [a-zA-Z0-9._:/-], a positive seq and an after from 0 to below
// seq.
func checkOrder(o *wire.PutOrder, origin string) *httpError {
	switch {
	case o == nil:
		return nil
	case origin == "":
		return invalid("order", "only with an origin (a replicator's stream)")
	case o.Stream == "" || len(o.Stream) > maxOrderStream:
		return invalid("order.stream", "must be 1 to %d bytes", maxOrderStream)
	case o.Seq <= 0:
		return invalid("order.seq", "%d: must be positive", o.Seq)
	case o.After < 0 || o.After >= o.Seq:
		return invalid("order.after", "%d: must be 0 or more and below order.seq (%d)", o.After, o.Seq)
	}
	for _, r := range o.Stream {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/-", r)) {
			return invalid("order.stream", "%q: only [a-zA-Z0-9._:/-]", o.Stream)
		}
	}
	return nil
}

// decodeWrite checks one cell of put_cells or a transaction, named where ("cells[3]").
func decodeWrite(where, row, col string, ref, body json.RawMessage, cfg *Config) (cells.Cell, *httpError) {
	if len(ref) == 0 {
		return cells.Cell{}, invalid(where+".ref_key", "is required")
	}
	r := string(ref)
	k, he := parseKey(where, row, col, &r)
	if he != nil {
		return cells.Cell{}, he
	}
	if int64(len(body)) > cfg.MaxCellBodyBytes {
		return cells.Cell{}, tooLarge(where+".body", "larger than %d bytes", cfg.MaxCellBodyBytes)
	}
	b, err := cells.EncodeBody(body)
	if err != nil {
		return cells.Cell{}, fieldError(where, err)
	}
	return cells.Cell{Key: k, Body: b}, nil
}

// getCellsRequest is wire.GetCellsRequest with raw ref keys (see putCellsRequest).
type getCellsRequest struct {
	Keys []struct {
		RowKey    string          `json:"row_key"`
		ColumnKey string          `json:"column_key"`
		RefKey    json.RawMessage `json:"ref_key"`
	} `json:"keys"`
}

// decodeGetCells decodes the body of a batch get into the keys to read and the keys as given
// (for the answer's missing list), in request order. A key without ref_key (or null) reads
// the column's latest cell.
func decodeGetCells(raw []byte, cfg *Config) ([]cluster.GetKey, []wire.GetKey, *httpError) {
	var req getCellsRequest
	if he := decodeStrict(raw, &req); he != nil {
		return nil, nil, he
	}
	if req.Keys == nil {
		return nil, nil, invalid("keys", "is required")
	}
	if len(req.Keys) > cfg.MaxBatchCells {
		return nil, nil, tooLarge("keys", "%d keys, at most %d per request", len(req.Keys), cfg.MaxBatchCells)
	}
	keys := make([]cluster.GetKey, len(req.Keys))
	given := make([]wire.GetKey, len(req.Keys))
	for i, gk := range req.Keys {
		where := fmt.Sprintf("keys[%d]", i)
		var ref *string
		given[i] = wire.GetKey{RowKey: gk.RowKey, ColumnKey: gk.ColumnKey}
		if len(gk.RefKey) > 0 && string(gk.RefKey) != "null" {
			v := string(gk.RefKey)
			ref = &v
			n := json.Number(v)
			given[i].RefKey = &n
		}
		k, he := parseKey(where, gk.RowKey, gk.ColumnKey, ref)
		if he != nil {
			return nil, nil, he
		}
		keys[i] = cluster.GetKey{Key: k, Latest: ref == nil}
	}
	return keys, given, nil
}

// transactionRequest is wire.TransactionRequest with raw ref keys (see putCellsRequest).
type transactionRequest struct {
	Conditions []wire.TxCondition `json:"conditions"`
	Writes     []struct {
		RowKey    string          `json:"row_key"`
		ColumnKey string          `json:"column_key"`
		RefKey    json.RawMessage `json:"ref_key"`
		Body      json.RawMessage `json:"body"`
	} `json:"writes"`
}

// decodeTransaction decodes the body of a transaction into its conditions and writes (at
// least one), in request order.
func decodeTransaction(raw []byte, cfg *Config) ([]cluster.Condition, []cells.Cell, *httpError) {
	var in transactionRequest
	if he := decodeStrict(raw, &in); he != nil {
		return nil, nil, he
	}
	switch {
	case len(in.Writes) == 0:
		return nil, nil, invalid("writes", "is required (at least one write)")
	case len(in.Writes) > cfg.MaxBatchCells:
		return nil, nil, tooLarge("writes", "%d writes, at most %d per transaction", len(in.Writes), cfg.MaxBatchCells)
	case len(in.Conditions) > cfg.MaxTransactionConditions:
		return nil, nil, tooLarge("conditions", "%d conditions, at most %d per transaction", len(in.Conditions), cfg.MaxTransactionConditions)
	}
	var conds []cluster.Condition
	for i, c := range in.Conditions {
		where := fmt.Sprintf("conditions[%d]", i)
		k, he := parseKey(where, c.RowKey, c.ColumnKey, nil)
		if he != nil {
			return nil, nil, he
		}
		cond := cluster.Condition{RowKey: k.RowKey, ColumnKey: k.ColumnKey}
		switch lr := strings.TrimSpace(string(c.LatestRefKey)); lr {
		case "":
			return nil, nil, invalid(where+".latest_ref_key", "is required (a ref key, or null for a column with no cell)")
		case "null":
			cond.None = true
		default:
			if cond.LatestRefKey, he = parseRefKey(where+".latest_ref_key", lr); he != nil {
				return nil, nil, he
			}
		}
		conds = append(conds, cond)
	}
	cs := make([]cells.Cell, len(in.Writes))
	for i, pw := range in.Writes {
		c, he := decodeWrite(fmt.Sprintf("writes[%d]", i), pw.RowKey, pw.ColumnKey, pw.RefKey, pw.Body, cfg)
		if he != nil {
			return nil, nil, he
		}
		cs[i] = c
	}
	return conds, cs, nil
}
