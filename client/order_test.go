package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// WithOrder sends put_cells' "order", and the calls of one stream go to one endpoint while
// calls without it rotate over them; a bad order fails unsent with ErrInvalidArgument.
func TestWithOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	hits := map[string][]int{} // stream ("" without order) -> servers it reached
	var srvs []*httptest.Server
	for i := range 3 {
		srvs = append(srvs, httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var req wire.PutCellsRequest
			assert.NoError(t, json.Unmarshal(b, &req))
			stream := ""
			if req.Order != nil {
				stream = req.Order.Stream
				assert.Equal(t, "east", req.Origin, "an ordered call carries its origin")
			}
			mu.Lock()
			hits[stream] = append(hits[stream], i)
			mu.Unlock()
			res := wire.PutCellsResponse{}
			for _, c := range req.Cells {
				res.Results = append(res.Results, wire.PutResult{RowKey: c.RowKey, ColumnKey: c.ColumnKey, RefKey: 1, Status: wire.StatusCreated, AddedID: 1})
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(res)
		})))
		defer srvs[i].Close()
	}
	cl := itClient(t, []string{srvs[0].URL, srvs[1].URL, srvs[2].URL}, func(*client.Config) {})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cw := []client.CellWrite{{Key: cells.Key{RowKey: uuid.New(), ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{}`)}}
	for i := range 6 {
		for _, stream := range []string{"3", "17"} {
			_, err := cl.PutCells(ctx, cw, client.WithOrigin("east"), client.WithOrder(stream, int64(10*i+10), int64(10*i)))
			require.NoError(t, err)
		}
	}
	for range 6 {
		_, err := cl.PutCells(ctx, cw)
		require.NoError(t, err)
	}
	mu.Lock()
	for _, stream := range []string{"3", "17"} {
		require.Len(t, hits[stream], 6)
		for _, s := range hits[stream] {
			assert.Equal(t, hits[stream][0], s, "stream %s: every call to one endpoint (%v)", stream, hits[stream])
		}
	}
	spread := map[int]bool{}
	for _, s := range hits[""] {
		spread[s] = true
	}
	assert.Greater(t, len(spread), 1, "calls without order rotate over the endpoints (%v)", hits[""])
	mu.Unlock()

	for _, bad := range []struct {
		name string
		opts []client.WriteOption
	}{
		{"no origin", []client.WriteOption{client.WithOrder("3", 2, 1)}},
		{"after not below seq", []client.WriteOption{client.WithOrigin("east"), client.WithOrder("3", 2, 2)}},
		{"seq 0", []client.WriteOption{client.WithOrigin("east"), client.WithOrder("3", 0, 0)}},
		{"empty stream", []client.WriteOption{client.WithOrigin("east"), client.WithOrder("", 2, 1)}},
	} {
		_, err := cl.PutCells(ctx, cw, bad.opts...)
		assert.ErrorIs(t, err, client.ErrInvalidArgument, bad.name)
		assert.ErrorContains(t, err, "order", bad.name)
	}
	mu.Lock()
	n := 0
	for _, h := range hits {
		n += len(h)
	}
	mu.Unlock()
	assert.Equal(t, 18, n, fmt.Sprintf("the refused calls were not sent (%d calls)", n))
}
