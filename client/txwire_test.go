package client_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

func TestTransactionFromWire(t *testing.T) {
	t.Parallel()
	const row = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
	var req wire.TransactionRequest
	require.NoError(t, json.Unmarshal([]byte(`{
		"conditions": [{"row_key": "`+row+`", "column_key": "STATUS", "latest_ref_key": 3},
		               {"row_key": "`+row+`", "column_key": "LOCK", "latest_ref_key": null},
		               {"row_key": "`+row+`", "column_key": "NEW"}],
		"writes": [{"row_key": "`+row+`", "column_key": "STATUS", "ref_key": 4, "body": {"s": "paid"}}]}`), &req))
	conds, writes, err := client.TransactionFromWire(req)
	require.NoError(t, err)
	require.Len(t, conds, 3)
	assert.Equal(t, row, conds[0].RowKey.String())
	assert.Equal(t, "STATUS", conds[0].ColumnKey)
	if assert.NotNil(t, conds[0].LatestRefKey) {
		assert.Equal(t, int64(3), *conds[0].LatestRefKey)
	}
	assert.Nil(t, conds[1].LatestRefKey, "null: the column has no cell")
	assert.Nil(t, conds[2].LatestRefKey, "absent: the column has no cell")
	require.Len(t, writes, 1)
	assert.Equal(t, int64(4), writes[0].Key.RefKey)
	assert.JSONEq(t, `{"s":"paid"}`, string(writes[0].Body))

	for _, tc := range []struct{ body, want string }{
		{`{"conditions": [{"row_key": "x", "column_key": "A"}]}`, "conditions[0].row_key"},
		{`{"conditions": [{"row_key": "` + row + `", "column_key": "A", "latest_ref_key": -1}]}`, "conditions[0].latest_ref_key: -1 is not a ref key or null"},
		{`{"conditions": [{"row_key": "` + row + `", "column_key": "A", "latest_ref_key": "3"}]}`, `conditions[0].latest_ref_key: "3" is not a ref key or null`},
		{`{"writes": [{"row_key": "` + row + `", "column_key": "A", "ref_key": 1.5, "body": {}}]}`, "writes[0].ref_key"},
		{`{"writes": [{"row_key": "nope", "column_key": "A", "ref_key": 1, "body": {}}]}`, "writes[0].row_key"},
	} {
		var req wire.TransactionRequest
		require.NoError(t, json.Unmarshal([]byte(tc.body), &req), tc.body)
		_, _, err := client.TransactionFromWire(req)
		assert.ErrorContains(t, err, tc.want, tc.body)
	}
}

func TestPreconditionErrorConditions(t *testing.T) {
	t.Parallel()
	three := int64(3)
	e := &client.PreconditionError{Failures: []wire.ConditionFailure{{Index: 0, LatestRefKey: &three}, {Index: 2}}}
	assert.Equal(t, "condition 0: the column's latest ref key is 3; condition 2: the column's latest ref key is none (no cell)", e.Conditions())
}
