package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// countingTransport counts the round trips per host, connection failures included.
type countingTransport struct {
	mu    sync.Mutex
	hosts map[string]int
	next  http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.hosts[r.URL.Host]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) count(base string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[strings.TrimPrefix(base, "http://")]
}

// hang blocks until the client gives up on the request (or 10s pass), then answers 500.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
	w.WriteHeader(http.StatusInternalServerError)
}

func putOne(ctx context.Context, c *client.Client, ref int64) (wire.PutResult, error) {
	return c.PutCell(ctx, row1, "BASE", ref, json.RawMessage(`{"ref":`+fmt.Sprint(ref)+`}`))
}

func getOne(ctx context.Context, c *client.Client, ref int64) error {
	_, err := c.GetCell(ctx, cells.Key{RowKey: row1, ColumnKey: "BASE", RefKey: ref})
	return err
}

// TestFailoverClosedEndpoint: with the first endpoint's listener closed, every call succeeds
// on the second, and the dead endpoint is tried last while it cools down. Not parallel: the
// calls must end within the dead endpoint's 1s cool-down.
func TestFailoverClosedEndpoint(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	dead, live := newFakeNode(t, store), newFakeNode(t, store)
	dead.srv.Close()
	ct := &countingTransport{hosts: map[string]int{}, next: http.DefaultTransport}
	c := newClient(t, func(c *client.Config) { c.HTTPClient = &http.Client{Transport: ct} }, dead, live)
	const calls = 20
	for i := range calls {
		if i%2 == 0 {
			_, err := putOne(ctx, c, int64(i))
			require.NoError(t, err, "PutCell %d", i)
		} else {
			require.NoError(t, getOne(ctx, c, int64(i-1)), "GetCell %d", i)
		}
	}
	assert.Equal(t, int64(calls), live.hits.Load(), "requests to the live endpoint")
	// The first call starts at the dead endpoint; then it is in cool-down and tried last. (Two
	// allows for a test machine so slow that the 1s cool-down ends during the loop.)
	got := ct.count(dead.URL())
	assert.True(t, got >= 1 && got <= 2, "dead endpoint: got %d attempts, want 1 (tried last while cooling down)", got)
	assert.ErrorIs(t, c.Ready(ctx, dead.URL()), client.ErrUnavailable, "Ready(dead)")
	assert.NoError(t, c.Ready(ctx, live.URL()), "Ready(live)")
}

// TestRetryAfter503: a 503 is retried on the next endpoint after the Retry-After wait, capped
// at BackoffMax.
func TestRetryAfter503(t *testing.T) {
	t.Parallel()
	for _, write := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := newFakeStore()
			busy, ok := newFakeNode(t, store), newFakeNode(t, store)
			busy.setFault(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "3")
				writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "no leader", "")
			})
			const backoffMax = 300 * time.Millisecond
			c := newClient(t, func(c *client.Config) { c.BackoffMax = backoffMax }, busy, ok)
			if !write {
				_, err := putOne(ctx, newClient(t, nil, ok), 1)
				require.NoError(t, err, "PutCell of the cell to read")
				ok.hits.Store(0)
			}
			start := time.Now()
			var err error
			if write {
				_, err = putOne(ctx, c, 1)
			} else {
				err = getOne(ctx, c, 1)
			}
			elapsed := time.Since(start)
			require.NoError(t, err)
			// The first call of a client starts at the first endpoint, busy.
			assert.Equal(t, int64(1), busy.hits.Load(), "requests to the busy node")
			assert.Equal(t, int64(1), ok.hits.Load(), "requests to the other node")
			assert.GreaterOrEqual(t, elapsed, backoffMax, "retry after: want at least Retry-After capped at BackoffMax")
			assert.Less(t, elapsed, 3*time.Second, "retry after: want the Retry-After of 3s capped at %s", backoffMax)
		})
	}
}

// TestUnavailableEverywhere: 503 on every endpoint is retried MaxAttempts times over all
// endpoints and ends ErrUnavailable (not indeterminate: nothing was done), for reads and writes.
func TestUnavailableEverywhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	nodes := []*fakeNode{newFakeNode(t, store), newFakeNode(t, store), newFakeNode(t, store)}
	for _, n := range nodes {
		n.setFault(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "no quorum", "")
		})
	}
	c := newClient(t, func(c *client.Config) { c.MaxAttempts = 6 }, nodes...)
	_, werr := putOne(ctx, c, 1)
	rerr := getOne(ctx, c, 1)
	for kind, err := range map[string]error{"write": werr, "read": rerr} {
		assert.ErrorIs(t, err, client.ErrUnavailable, kind)
		assert.NotErrorIs(t, err, client.ErrIndeterminate, kind)
	}
	for i, n := range nodes {
		assert.Equal(t, int64(4), n.hits.Load(), "node %d: requests (2 calls x 6 attempts spread over 3 nodes)", i)
	}
}

// TestFinalErrorsNotRetried: 400, 404, 409 and 413 are answered once, whatever MaxAttempts.
func TestFinalErrorsNotRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, st := range []struct {
		status int
		code   string
	}{{400, wire.CodeInvalidArgument}, {404, wire.CodeNotFound}, {409, wire.CodeConflict}, {413, wire.CodeTooLarge}} {
		store := newFakeStore()
		nodes := []*fakeNode{newFakeNode(t, store), newFakeNode(t, store)}
		for _, n := range nodes {
			n.setFault(func(w http.ResponseWriter, r *http.Request) { writeError(w, st.status, st.code, "no", "") })
		}
		c := newClient(t, nil, nodes...)
		_, werr := putOne(ctx, c, 1)
		rerr := getOne(ctx, c, 1)
		assert.Error(t, werr, "%d: write", st.status)
		assert.Error(t, rerr, "%d: read", st.status)
		assert.Equal(t, int64(2), nodes[0].hits.Load()+nodes[1].hits.Load(), "%d: requests for 2 calls (want 2: not retried)", st.status)
	}
}

// TestServerErrorRetriedForReadsOnly: a 500 is retried on another node for a read, final for
// a write.
func TestServerErrorRetriedForReadsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	broken, ok := newFakeNode(t, store), newFakeNode(t, store)
	_, err := putOne(ctx, newClient(t, nil, ok), 1)
	require.NoError(t, err, "PutCell of the cell to read")
	broken.setFault(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "disk on fire", "")
	})
	c := newClient(t, nil, broken, ok) // starts at broken
	assert.NoError(t, getOne(ctx, c, 1), "read: want success after failover")
	c = newClient(t, nil, broken, ok) // a fresh rotation and cool-down: starts at broken again
	_, err = putOne(ctx, c, 2)
	assert.ErrorIs(t, err, client.ErrInternal, "write")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "write")
	assert.Equal(t, int64(2), broken.hits.Load(), "requests to the broken node (one per call)")
}

// TestIndeterminate: nodes that never answer within RequestTimeout make a write indeterminate
// and a read unavailable.
func TestIndeterminate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	nodes := []*fakeNode{newFakeNode(t, store), newFakeNode(t, store)}
	for _, n := range nodes {
		n.setFault(hang)
	}
	// The attempts are counted where the client sends them: an attempt the client gives up on
	// may never reach its node's handler on a loaded machine.
	sent := &countingTransport{hosts: map[string]int{}, next: client.NewTransport(nil)}
	c := newClient(t, func(c *client.Config) {
		c.RequestTimeout = 100 * time.Millisecond
		c.MaxAttempts = 3
		c.HTTPClient = &http.Client{Transport: sent}
	}, nodes...)

	_, err := putOne(ctx, c, 1)
	assert.ErrorIs(t, err, client.ErrIndeterminate, "put_cell")
	assert.NotErrorIs(t, err, client.ErrUnavailable, "put_cell")
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "put_cell: ctx did not end")
	_, err = c.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: row1, ColumnKey: "A"}, Body: json.RawMessage(`{}`)}})
	assert.ErrorIs(t, err, client.ErrIndeterminate, "put_cells")
	err = getOne(ctx, c, 1)
	assert.ErrorIs(t, err, client.ErrUnavailable, "get_cell")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "get_cell")
	assert.Equal(t, 9, sent.count(nodes[0].URL())+sent.count(nodes[1].URL()), "requests sent (3 calls x 3 attempts)")
}

// TestIndeterminateThenUnavailable: a write whose first attempt timed out stays indeterminate
// even when the later attempts say 503 (nothing done by them).
func TestIndeterminateThenUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	slow, busy := newFakeNode(t, store), newFakeNode(t, store)
	slow.setFault(hang)
	busy.setFault(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "no leader", "")
	})
	// The attempts are counted where the client sends them: the one it gives up on after 50ms
	// may never reach the slow node's handler on a loaded machine.
	sent := &countingTransport{hosts: map[string]int{}, next: client.NewTransport(nil)}
	c := newClient(t, func(c *client.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxAttempts = 2
		c.HTTPClient = &http.Client{Transport: sent}
	}, slow, busy)
	_, err := putOne(ctx, c, 1)
	assert.ErrorIs(t, err, client.ErrIndeterminate)
	assert.NotErrorIs(t, err, client.ErrUnavailable)
	assert.Equal(t, 1, sent.count(slow.URL()), "requests to the slow node")
	assert.Equal(t, 1, sent.count(busy.URL()), "requests to the busy node")
}

// TestTimedOutWriteRetried: a node applies a write but answers too late; the retry on the next
// node reports the cell as existing. Not parallel: the second node must answer within the 50ms
// request timeout.
func TestTimedOutWriteRetried(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	slow, ok := newFakeNode(t, store), newFakeNode(t, store)
	// The slow node applies the write through the shared store, then never answers.
	slow.setFault(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/") // /v1/trips/cells/{row}/{col}/{ref}
		k, err := parseKey(parts[4], parts[5], parts[6])
		assert.NoError(t, err, "slow node: key of %s", r.URL.Path)
		var body json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		enc, _ := cells.EncodeBody(body)
		store.put(k, body, enc)
		hang(w, r)
	})
	c := newClient(t, func(c *client.Config) { c.RequestTimeout = 50 * time.Millisecond }, slow, ok)
	res, err := putOne(ctx, c, 1)
	assert.NoError(t, err)
	assert.Equal(t, wire.StatusExists, res.Status, "status (applied by the timed-out attempt)")
	assert.Equal(t, int64(1), slow.hits.Load(), "requests to the slow node")
	assert.Equal(t, int64(1), ok.hits.Load(), "requests to the other node")
}

// Test504 checks that a 504 indeterminate answer is retried, and ends a write indeterminate and
// a read unavailable.
func Test504(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	nodes := []*fakeNode{newFakeNode(t, store), newFakeNode(t, store)}
	for _, n := range nodes {
		n.setFault(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusGatewayTimeout, wire.CodeIndeterminate, "timed out", "")
		})
	}
	c := newClient(t, func(c *client.Config) { c.MaxAttempts = 3 }, nodes...)
	_, werr := putOne(ctx, c, 1)
	assert.ErrorIs(t, werr, client.ErrIndeterminate, "write")
	var ae *client.APIError
	if assert.ErrorAs(t, werr, &ae, "write: want a 504 *APIError") {
		assert.Equal(t, 504, ae.StatusCode, "write: status")
	}
	rerr := getOne(ctx, c, 1)
	assert.ErrorIs(t, rerr, client.ErrUnavailable, "read")
	assert.NotErrorIs(t, rerr, client.ErrIndeterminate, "read")
	assert.Equal(t, int64(6), nodes[0].hits.Load()+nodes[1].hits.Load(), "requests (2 calls x 3 attempts)")
	// Then a node answers: the write's retry succeeds.
	nodes[1].setFault(nil)
	_, err := putOne(ctx, c, 1)
	assert.NoError(t, err, "write after 504 then success")
}

// TestContextCancel: cancelling ctx ends a call promptly with ctx's error; a write in flight is
// also indeterminate, a read is not.
func TestContextCancel(t *testing.T) {
	t.Parallel()
	store := newFakeStore()
	n := newFakeNode(t, store)
	n.setFault(hang)
	c := newClient(t, func(c *client.Config) { c.RequestTimeout = 30 * time.Second }, n)
	for _, write := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		var err error
		if write {
			_, err = putOne(ctx, c, 1)
		} else {
			err = getOne(ctx, c, 1)
		}
		assert.LessOrEqual(t, time.Since(start), 5*time.Second, "write=%v: want a return promptly after cancel", write)
		assert.ErrorIs(t, err, context.Canceled, "write=%v", write)
		assert.Equal(t, write, errors.Is(err, client.ErrIndeterminate), "write=%v: ErrIndeterminate in %v", write, err)
		cancel()
	}
}

// TestContextDeadlineDuringBackoff: a ctx deadline during a long Retry-After wait ends the call
// at the deadline; a write whose attempts all said 503 is not indeterminate. Not parallel: the
// first attempt must be answered within the 100ms deadline.
func TestContextDeadlineDuringBackoff(t *testing.T) {
	n := newFakeNode(t, newFakeStore())
	n.setFault(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "no leader", "")
	})
	c := newClient(t, func(c *client.Config) { c.BackoffMax = time.Minute }, n)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := putOne(ctx, c, 1)
	assert.LessOrEqual(t, time.Since(start), 5*time.Second, "want a return at the 100ms deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, client.ErrIndeterminate)
	assert.Equal(t, int64(1), n.hits.Load(), "requests")
}

// TestConcurrent runs 50 goroutines over one client (and WithDatastore copies) while one
// endpoint is down; run it with -race.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	dead := newFakeNode(t, store)
	dead.srv.Close()
	nodes := []*fakeNode{dead, newFakeNode(t, store), newFakeNode(t, store)}
	c := newClient(t, nil, nodes...)
	shared := uuid.MustParse("11111111-1111-4111-8111-111111111111")
	const workers = 50
	var created atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			cl := c
			if i%2 == 1 {
				cl = c.WithDatastore(testDatastore)
			}
			row := uuid.New()
			body := json.RawMessage(fmt.Sprintf(`{"worker":%d}`, i))
			res, err := cl.PutCell(ctx, row, "BASE", int64(i), body)
			if !assert.NoError(t, err, "worker %d: PutCell", i) || !assert.Equal(t, wire.StatusCreated, res.Status, "worker %d: PutCell", i) {
				return
			}
			got, err := cl.GetCellLatest(ctx, row, "BASE", client.WithConsistency(client.ConsistencyStale))
			if assert.NoError(t, err, "worker %d: GetCellLatest", i) {
				assert.Equal(t, int64(i), got.RefKey, "worker %d: GetCellLatest: ref key", i)
				assert.Contains(t, string(got.Body), fmt.Sprint(i), "worker %d: GetCellLatest: body", i)
			}
			rs, err := cl.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: shared, ColumnKey: "S", RefKey: 1},
				Body: json.RawMessage(`{"same":true}`)}})
			if !assert.NoError(t, err, "worker %d: PutCells", i) {
				return
			}
			if rs[0].Status == wire.StatusCreated {
				created.Add(1)
			} else {
				assert.Equal(t, wire.StatusExists, rs[0].Status, "worker %d: PutCells: want created or exists", i)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), created.Load(), "shared cell: writers told created")
	assert.Equal(t, int64(3*workers), nodes[1].hits.Load()+nodes[2].hits.Load(), "requests on the live nodes (3 per worker)")
}

// TestAllEndpointsDown: when no node accepts a connection, nothing was sent: a write is
// unavailable, not indeterminate.
func TestAllEndpointsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newFakeStore()
	a, b := newFakeNode(t, store), newFakeNode(t, store)
	a.srv.Close()
	b.srv.Close()
	ct := &countingTransport{hosts: map[string]int{}, next: http.DefaultTransport}
	c := newClient(t, func(c *client.Config) {
		c.HTTPClient = &http.Client{Transport: ct}
		c.MaxAttempts = 4
	}, a, b)
	_, err := putOne(ctx, c, 1)
	assert.ErrorIs(t, err, client.ErrUnavailable, "write")
	assert.NotErrorIs(t, err, client.ErrIndeterminate, "write")
	assert.ErrorIs(t, getOne(ctx, c, 1), client.ErrUnavailable, "read")
	assert.Equal(t, 4, ct.count(a.URL()), "attempts on the first endpoint (alternating)")
	assert.Equal(t, 4, ct.count(b.URL()), "attempts on the second endpoint (alternating)")
}
