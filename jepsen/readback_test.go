package jepsen

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// readUnfrozen waits out a shard refused with 503 (its partition frozen by a merge whose answer
// was lost) beyond the client's own attempts, and gives up at once on any other error.
func TestReadUnfrozen(t *testing.T) {
	t.Parallel()
	var calls, unavailable atomic.Int64
	unavailable.Store(3)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/durability/shards/9/cells" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeNotFound, Message: "no such datastore"}})
			return
		}
		if unavailable.Add(-1) >= 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_ = json.NewEncoder(w).Encode(wire.ErrorBody{Error: wire.ErrorDetail{Code: wire.CodeUnavailable, Message: "command: shard outside the partition"}})
			return
		}
		_ = json.NewEncoder(w).Encode(wire.ShardCellsResponse{Shard: 8, NextLocation: 0})
	}))
	defer srv.Close()
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = []string{srv.URL}, "durability"
	cfg.MaxAttempts, cfg.BackoffBase, cfg.BackoffMax = 1, time.Millisecond, time.Millisecond
	cl, err := client.New(cfg)
	require.NoError(t, err)
	page, err := readUnfrozen(context.Background(), cl, 8, 0)
	require.NoError(t, err, "read after 3 answers of 503")
	assert.Equal(t, 8, page.Shard)
	assert.EqualValues(t, 4, calls.Load(), "3 refusals, then the page")
	calls.Store(0)
	_, err = readUnfrozen(context.Background(), cl, 9, 0)
	assert.ErrorIs(t, err, client.ErrNotFound, "another error is returned")
	assert.EqualValues(t, 1, calls.Load(), "not retried")
}
