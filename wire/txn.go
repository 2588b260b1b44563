package wire

import "encoding/json"

// ConditionFailure is one condition of a write that did not hold: its index in the request's
// conditions (0 for a conditional put_cell) and the column's latest ref key when the write was
// applied (null: the column has no cell).
type ConditionFailure struct {
	Index        int    `json:"index"`
	LatestRefKey *int64 `json:"latest_ref_key"`
}

// TxCondition is one condition of a transaction: the latest ref key of row_key's column_key
// must be latest_ref_key, or, when latest_ref_key is null, the column must have no cell. The
// field is required (null included).
type TxCondition struct {
	RowKey       string          `json:"row_key"`
	ColumnKey    string          `json:"column_key"`
	LatestRefKey json.RawMessage `json:"latest_ref_key"`
}

// TransactionRequest is the body of POST /v1/{datastore}/transactions: conditions that must
// all hold and cells to write, all or none, on rows of one partition.
type TransactionRequest struct {
	Conditions []TxCondition `json:"conditions"`
	Writes     []PutCell     `json:"writes"`
}

// TransactionResponse answers a committed transaction: the partition it ran on and one result
// per write, in request order (created, or exists for a cell stored before with the same body).
type TransactionResponse struct {
	Committed bool        `json:"committed"`
	Partition int         `json:"partition"`
	Results   []PutResult `json:"results"`
}

// RowKeysResponse answers GET /v1/{datastore}/row_keys?near=ROW&count=N: new random row keys
// in the shard (hence the partition) of ROW, for rows that transactions will write together.
type RowKeysResponse struct {
	Shard     int      `json:"shard"`
	Partition int      `json:"partition"`
	RowKeys   []string `json:"row_keys"`
}
