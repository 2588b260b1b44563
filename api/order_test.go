package api_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

// orderedBody is a put_cells body of one cell (row r, column col, ref key 1) from the cluster
// peer-a, chained by order (seq, after) in stream s.
func orderedBody(r, col, stream string, seq, after int64) string {
	return fmt.Sprintf(`{"origin":"peer-a","order":{"stream":%q,"seq":%d,"after":%d},"cells":[{"row_key":%q,"column_key":%q,"ref_key":1,"body":{"c":%q}}]}`,
		stream, seq, after, r, col, col)
}

// Ordered put_cells (order): a request chained after one that has not arrived yet waits for
// it and is applied after it; one chained after a request that never comes is refused with
// 409 out_of_order and writes nothing; a bad order is a 400 naming its field.
func (s *session) testOrdered(t *testing.T) {
	r := row(900)
	stream := fmt.Sprintf("s%d", time.Now().UnixNano()) // each engine's run its own chain

	// The second request is sent first: it waits at the node for the first one.
	var wg sync.WaitGroup
	var second answer
	var secondErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		second, secondErr = s.tryDo(1, "POST", "/v1/trips/cells", orderedBody(r, "SECOND", stream, 20, 10))
	}()
	time.Sleep(50 * time.Millisecond)
	s.do(t, 1, "POST", "/v1/trips/cells", orderedBody(r, "FIRST", stream, 10, 0)).expect(t, http.StatusOK)
	wg.Wait()
	require.NoError(t, secondErr)
	second.expect(t, http.StatusOK)
	var first, next wire.Cell
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/FIRST/1", "").expect(t, http.StatusOK).decode(t, &first)
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/SECOND/1", "").expect(t, http.StatusOK).decode(t, &next)
	assert.Less(t, first.AddedID, next.AddedID, "the request chained after the first one was applied after it, though sent before it")
	assert.Equal(t, "peer-a", next.Origin)

	// Chained after a request the node never gets: refused after the arrival wait, nothing written.
	began := time.Now()
	s.do(t, 1, "POST", "/v1/trips/cells", orderedBody(r, "ORPHAN", stream, 40, 30)).expectError(t, http.StatusConflict, wire.CodeOutOfOrder, "order.after")
	assert.GreaterOrEqual(t, time.Since(began), 200*time.Millisecond, "the refusal waits for the predecessor to arrive first")
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/ORPHAN/1", "").expect(t, http.StatusNotFound)
	// Chained after the last applied request: applied at once.
	s.do(t, 1, "POST", "/v1/trips/cells", orderedBody(r, "THIRD", stream, 30, 20)).expect(t, http.StatusOK)

	for _, bad := range []struct{ body, field string }{
		{fmt.Sprintf(`{"order":{"stream":"a","seq":2,"after":1},"cells":[{"row_key":%q,"column_key":"BAD","ref_key":1,"body":{}}]}`, r), "order"},
		{orderedBody(r, "BAD", "a", 2, 2), "order.after"},
		{orderedBody(r, "BAD", "a", 2, -1), "order.after"},
		{orderedBody(r, "BAD", "a", 0, 0), "order.seq"},
		{orderedBody(r, "BAD", "", 2, 1), "order.stream"},
		{orderedBody(r, "BAD", "a b", 2, 1), "order.stream"},
	} {
		s.do(t, 0, "POST", "/v1/trips/cells", bad.body).expectError(t, http.StatusBadRequest, wire.CodeInvalidArgument, bad.field)
	}
	s.do(t, 0, "GET", "/v1/trips/cells/"+r+"/BAD/1", "").expect(t, http.StatusNotFound)
	require.NotZero(t, first.AddedID)
}
