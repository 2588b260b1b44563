package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

// doWith is do with request headers.
func (s *session) doWith(t *testing.T, node int, method, path, body string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.c.URL(node)+path, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err, "%s %s", method, path)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return answer{status: res.StatusCode, header: res.Header, body: b}
}

// errorOf decodes an error answer with status.
func errorOf(t *testing.T, a answer, status int) wire.ErrorDetail {
	t.Helper()
	var e wire.ErrorBody
	a.expect(t, status).decode(t, &e)
	require.NotEmpty(t, e.Error.Message, "error message")
	return e.Error
}

// rowsNear returns n row keys in the shard of a new random row, and that row.
func (s *session) rowsNear(t *testing.T, n int) []string {
	t.Helper()
	first := uuid.NewString()
	var rk wire.RowKeysResponse
	s.do(t, 0, "GET", fmt.Sprintf("/v1/trips/row_keys?near=%s&count=%d", first, n-1), "").expect(t, 200).decode(t, &rk)
	require.Len(t, rk.RowKeys, n-1, "row_keys")
	return append([]string{first}, rk.RowKeys...)
}

func (s *session) testConditional(t *testing.T) {
	r := uuid.NewString()
	base := "/v1/trips/cells/" + r + "/STATUS/"
	// if none: the first write wins; a second if-none fails naming the latest ref key.
	var res wire.PutResult
	s.doRetry(t, 0, "PUT", base+"1?if_latest_ref_key=none", `{"s":"booked"}`).expect(t, 201).decode(t, &res)
	assert.Equal(t, "created", res.Status)
	e := errorOf(t, s.do(t, 1, "PUT", base+"2?if_latest_ref_key=none", `{"s":"boarded"}`), 412)
	assert.Equal(t, wire.CodePreconditionFailed, e.Code)
	assert.JSONEq(t, `1`, string(e.LatestRefKey), "latest_ref_key of a column with one cell")
	// if latest = 1: created; then if latest = 1 again: 412 with latest 2; nothing written.
	s.do(t, 1, "PUT", base+"2?if_latest_ref_key=1", `{"s":"boarded"}`).expect(t, 201)
	e = errorOf(t, s.do(t, 2, "PUT", base+"3?if_latest_ref_key=1", `{"s":"landed"}`), 412)
	assert.JSONEq(t, `2`, string(e.LatestRefKey))
	s.do(t, 0, "GET", base+"3", "").expectError(t, 404, "not_found", "")
	// A condition on a column with no cell names null.
	e = errorOf(t, s.do(t, 0, "PUT", "/v1/trips/cells/"+uuid.NewString()+"/STATUS/2?if_latest_ref_key=1", `{}`), 412)
	assert.JSONEq(t, `null`, string(e.LatestRefKey), "latest_ref_key of a column with no cell")
	// A retry of the write that succeeded (same key and body) answers exists, condition or not.
	s.do(t, 0, "PUT", base+"2?if_latest_ref_key=1", `{"s":"boarded"}`).expectError(t, 412, wire.CodePreconditionFailed, "")
	var ex wire.PutResult
	s.do(t, 0, "PUT", base+"2", `{"s":"boarded"}`).expect(t, 200).decode(t, &ex)
	assert.Equal(t, "exists", ex.Status)
	// Bad conditions: 400 naming the parameter, nothing written.
	s.do(t, 0, "PUT", base+"9?if_latest_ref_key=-1", `{}`).expectError(t, 400, "invalid_argument", "if_latest_ref_key")
	s.do(t, 0, "PUT", base+"9?if_latest_ref_key=x", `{}`).expectError(t, 400, "invalid_argument", "if_latest_ref_key")
	s.do(t, 0, "PUT", base+"9?if_latest_ref_key=1&if_latest_ref_key=2", `{}`).expectError(t, 400, "invalid_argument", "if_latest_ref_key")
	s.do(t, 0, "GET", base+"9", "").expectError(t, 404, "not_found", "")
}

func (s *session) testIdempotency(t *testing.T) {
	r := uuid.NewString()
	path := "/v1/trips/cells/" + r + "/BASE/1"
	key := map[string]string{wire.HeaderIdempotencyKey: "trip-" + r}
	var first, again wire.PutResult
	a := s.doWith(t, 0, "PUT", path, `{"fare":10}`, key)
	a.expect(t, 201).decode(t, &first)
	// The same request with the same key, to another node: the first outcome, created.
	a = s.doWith(t, 1, "PUT", path, `{"fare":10}`, key)
	a.expect(t, 201).decode(t, &again)
	assert.Equal(t, first, again, "a retry with the key answers the first outcome")
	assert.Equal(t, "true", a.header.Get(wire.HeaderReplayed), "the retry's answer says it is replayed")
	// Without the key the same write answers exists.
	s.do(t, 2, "PUT", path, `{"fare":10}`).expect(t, 200)
	// The key used for another request: 422, nothing written.
	s.doWith(t, 2, "PUT", "/v1/trips/cells/"+r+"/BASE/2", `{"fare":11}`, key).expectError(t, 422, wire.CodeIdempotencyKeyReused, "header Idempotency-Key")
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/BASE/2", "").expectError(t, 404, "not_found", "")
	// Nor later: in async mode the write's buffered copies are deleted, so the reaper (which
	// replays what the master lacks after 2 s) has nothing to bring back.
	assert.Never(t, func() bool {
		a, err := s.tryDo(0, "GET", "/v1/trips/cells/"+r+"/BASE/2", "")
		return err == nil && a.status == 200
	}, 3*time.Second, 250*time.Millisecond, "the refused write appeared later")
	// put_cells with a key: the retry answers created for both cells.
	body := fmt.Sprintf(`{"cells":[{"row_key":%q,"column_key":"A","ref_key":1,"body":{}},{"row_key":%q,"column_key":"A","ref_key":1,"body":{}}]}`, uuid.NewString(), uuid.NewString())
	bk := map[string]string{wire.HeaderIdempotencyKey: "batch-" + r}
	var b1, b2 wire.PutCellsResponse
	s.doWith(t, 0, "POST", "/v1/trips/cells", body, bk).expect(t, 200).decode(t, &b1)
	s.doWith(t, 1, "POST", "/v1/trips/cells", body, bk).expect(t, 200).decode(t, &b2)
	assert.Equal(t, b1, b2, "put_cells retried with its key")
	assert.Equal(t, "created", b2.Results[1].Status)
	// Bad keys: 400 naming the header.
	s.doWith(t, 0, "PUT", path, `{"fare":10}`, map[string]string{wire.HeaderIdempotencyKey: strings.Repeat("k", 129)}).expectError(t, 400, "invalid_argument", "header Idempotency-Key")
	s.doWith(t, 0, "PUT", path, `{"fare":10}`, map[string]string{wire.HeaderIdempotencyKey: "tab\there"}).expectError(t, 400, "invalid_argument", "header Idempotency-Key")
}

func (s *session) testTransactions(t *testing.T) {
	rows := s.rowsNear(t, 3)
	a, b, c := rows[0], rows[1], rows[2]
	tx := func(conds, writes string) string { return `{"conditions":[` + conds + `],"writes":[` + writes + `]}` }
	w := func(row, col string, ref int, body string) string {
		return fmt.Sprintf(`{"row_key":%q,"column_key":%q,"ref_key":%d,"body":%s}`, row, col, ref, body)
	}
	cond := func(row, col, latest string) string {
		return fmt.Sprintf(`{"row_key":%q,"column_key":%q,"latest_ref_key":%s}`, row, col, latest)
	}
	// Open two accounts and a lock row together.
	var res wire.TransactionResponse
	s.doRetry(t, 0, "POST", "/v1/trips/transactions", tx(cond(a, "BALANCE", "null")+","+cond(b, "BALANCE", "null"),
		w(a, "BALANCE", 1, `{"n":100}`)+","+w(b, "BALANCE", 1, `{"n":0}`))).expect(t, 200).decode(t, &res)
	require.True(t, res.Committed)
	require.Len(t, res.Results, 2)
	assert.Equal(t, "created", res.Results[0].Status)
	assert.Positive(t, res.Results[1].AddedID)
	// A transfer conditional on the versions read.
	transfer := tx(cond(a, "BALANCE", "1")+","+cond(b, "BALANCE", "1"), w(a, "BALANCE", 2, `{"n":60}`)+","+w(b, "BALANCE", 2, `{"n":40}`))
	s.do(t, 1, "POST", "/v1/trips/transactions", transfer).expect(t, 200)
	// The same transfer again: its conditions no longer hold; 412 listing both, nothing written.
	again := tx(cond(a, "BALANCE", "1")+","+cond(b, "BALANCE", "2"), w(a, "BALANCE", 3, `{"n":20}`)+","+w(b, "BALANCE", 3, `{"n":80}`))
	e := errorOf(t, s.do(t, 2, "POST", "/v1/trips/transactions", again), 412)
	assert.Equal(t, wire.CodePreconditionFailed, e.Code)
	two := int64(2)
	assert.Equal(t, []wire.ConditionFailure{{Index: 0, LatestRefKey: &two}}, e.Failed, "the failed condition and the latest ref key")
	s.do(t, 0, "GET", "/v1/trips/cells/"+b+"/BALANCE/3", "").expectError(t, 404, "not_found", "")
	// A write whose key holds another body: 409 naming it, nothing written (c stays empty).
	e = errorOf(t, s.do(t, 0, "POST", "/v1/trips/transactions", tx("", w(c, "LOCK", 1, `{}`)+","+w(a, "BALANCE", 2, `{"n":1}`))), 409)
	assert.Equal(t, []int{1}, e.Conflicts)
	s.do(t, 0, "GET", "/v1/trips/cells/"+c+"/LOCK/1", "").expectError(t, 404, "not_found", "")
	// Rows of two partitions: 400 cross_partition naming them; nothing written.
	var other string
	for other == "" {
		cand := uuid.NewString()
		var rk wire.RowKeysResponse
		var mine wire.RowKeysResponse
		s.do(t, 0, "GET", "/v1/trips/row_keys?near="+cand, "").expect(t, 200).decode(t, &rk)
		s.do(t, 0, "GET", "/v1/trips/row_keys?near="+a, "").expect(t, 200).decode(t, &mine)
		if rk.Partition != mine.Partition {
			other = cand
		}
	}
	a2 := s.do(t, 0, "POST", "/v1/trips/transactions", tx("", w(c, "LOCK", 1, `{}`)+","+w(other, "LOCK", 1, `{}`)))
	e = errorOf(t, a2, 400)
	assert.Equal(t, wire.CodeCrossPartition, e.Code)
	assert.Contains(t, e.Message, other, "the message names the rows")
	s.do(t, 0, "GET", "/v1/trips/cells/"+c+"/LOCK/1", "").expectError(t, 404, "not_found", "")
	// Bad requests: 400 naming the field.
	s.do(t, 0, "POST", "/v1/trips/transactions", tx("", "")).expectError(t, 400, "invalid_argument", "writes")
	s.do(t, 0, "POST", "/v1/trips/transactions", tx(`{"row_key":"`+a+`","column_key":"BALANCE"}`, w(c, "LOCK", 1, `{}`))).expectError(t, 400, "invalid_argument", "conditions[0].latest_ref_key")
	s.do(t, 0, "POST", "/v1/trips/transactions", tx(cond(a, "BALANCE", "-3"), w(c, "LOCK", 1, `{}`))).expectError(t, 400, "invalid_argument", "conditions[0].latest_ref_key")
	s.do(t, 0, "POST", "/v1/trips/transactions", tx(cond("nope", "BALANCE", "1"), w(c, "LOCK", 1, `{}`))).expectError(t, 400, "invalid_argument", "conditions[0].row_key")
	s.do(t, 0, "POST", "/v1/trips/transactions", tx("", w(c, "LOCK", 1, `[1]`))).expectError(t, 400, "invalid_argument", "writes[0].body")
	var many []string
	for i := 0; i < 11; i++ {
		many = append(many, w(c, "LOCK", i+1, `{}`))
	}
	s.do(t, 0, "POST", "/v1/trips/transactions", tx("", strings.Join(many, ","))).expectError(t, 413, "too_large", "writes")
	s.do(t, 0, "POST", "/v1/trips/transactions", `{"writes":[],"extra":1}`).expectError(t, 400, "invalid_argument", "body")
	s.do(t, 0, "GET", "/v1/trips/cells/"+c+"/LOCK/1", "").expectError(t, 404, "not_found", "")
	// Balances after all of it: 60 and 40.
	var cell wire.Cell
	s.do(t, 0, "GET", "/v1/trips/cells/"+a+"/BALANCE", "").expect(t, 200).decode(t, &cell)
	assert.Equal(t, int64(2), cell.RefKey)
	var bal struct{ N int }
	require.NoError(t, json.Unmarshal(cell.Body, &bal))
	assert.Equal(t, 60, bal.N)
}

func (s *session) testRowKeys(t *testing.T) {
	near := uuid.NewString()
	var rk wire.RowKeysResponse
	s.do(t, 0, "GET", "/v1/trips/row_keys?near="+near+"&count=5", "").expect(t, 200).decode(t, &rk)
	require.Len(t, rk.RowKeys, 5)
	var self wire.RowKeysResponse
	for _, k := range rk.RowKeys {
		s.do(t, 1, "GET", "/v1/trips/row_keys?near="+k, "").expect(t, 200).decode(t, &self)
		assert.Equal(t, rk.Shard, self.Shard, "row key %s is in the shard of %s", k, near)
		assert.NotEqual(t, near, k)
	}
	s.do(t, 0, "GET", "/v1/trips/row_keys?near=x", "").expectError(t, 400, "invalid_argument", "near")
	s.do(t, 0, "GET", "/v1/trips/row_keys?near="+near+"&count=0", "").expectError(t, 400, "invalid_argument", "count")
	s.do(t, 0, "GET", "/v1/trips/row_keys?near="+near+"&count=101", "").expectError(t, 400, "invalid_argument", "count")
}
