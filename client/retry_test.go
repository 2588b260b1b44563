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

	"github.com/schemaless-db/schemaless/api/wire"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
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
// on the second, and the dead endpoint is tried last while it cools down.
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
			if _, err := putOne(ctx, c, int64(i)); err != nil {
				t.Fatalf("PutCell %d: got %v, want nil", i, err)
			}
		} else if err := getOne(ctx, c, int64(i-1)); err != nil {
			t.Fatalf("GetCell %d: got %v, want nil", i, err)
		}
	}
	if got := live.hits.Load(); got != calls {
		t.Errorf("live endpoint: got %d requests, want %d", got, calls)
	}
	// The first call starts at the dead endpoint; then it is in cool-down and tried last. (Two
	// allows for a test machine so slow that the 1s cool-down ends during the loop.)
	if got := ct.count(dead.URL()); got < 1 || got > 2 {
		t.Errorf("dead endpoint: got %d attempts, want 1 (tried last while cooling down)", got)
	}
	if err := c.Ready(ctx, dead.URL()); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Ready(dead): got %v, want ErrUnavailable", err)
	}
	if err := c.Ready(ctx, live.URL()); err != nil {
		t.Errorf("Ready(live): got %v, want nil", err)
	}
}

// TestRetryAfter503: a 503 is retried on the next endpoint after the Retry-After wait, capped
// at BackoffMax.
func TestRetryAfter503(t *testing.T) {
	for _, write := range []bool{false, true} {
		t.Run(fmt.Sprintf("write=%v", write), func(t *testing.T) {
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
				if _, err := putOne(ctx, newClient(t, nil, ok), 1); err != nil {
					t.Fatal(err) // the cell to read
				}
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
			if err != nil {
				t.Fatalf("got %v, want nil", err)
			}
			// The first call of a client starts at the first endpoint, busy.
			if b, o := busy.hits.Load(), ok.hits.Load(); b != 1 || o != 1 {
				t.Errorf("got %d requests to the busy node and %d to the other, want 1 and 1", b, o)
			}
			if elapsed < backoffMax {
				t.Errorf("got a retry after %s, want at least Retry-After capped at BackoffMax (%s)", elapsed, backoffMax)
			}
			if elapsed >= 3*time.Second {
				t.Errorf("got a retry after %s, want the Retry-After of 3s capped at %s", elapsed, backoffMax)
			}
		})
	}
}

// TestUnavailableEverywhere: 503 on every endpoint is retried MaxAttempts times over all
// endpoints and ends ErrUnavailable (not indeterminate: nothing was done), for reads and writes.
func TestUnavailableEverywhere(t *testing.T) {
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
	for _, err := range []error{werr, rerr} {
		if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
			t.Errorf("got %v, want ErrUnavailable and not ErrIndeterminate", err)
		}
	}
	for i, n := range nodes {
		if got := n.hits.Load(); got != 4 {
			t.Errorf("node %d: got %d requests, want 4 (2 calls x 6 attempts spread over 3 nodes)", i, got)
		}
	}
}

// TestFinalErrorsNotRetried: 400, 404, 409 and 413 are answered once, whatever MaxAttempts.
func TestFinalErrorsNotRetried(t *testing.T) {
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
		if werr == nil || rerr == nil {
			t.Errorf("%d: got %v and %v, want errors", st.status, werr, rerr)
		}
		if h := nodes[0].hits.Load() + nodes[1].hits.Load(); h != 2 {
			t.Errorf("%d: got %d requests for 2 calls, want 2 (not retried)", st.status, h)
		}
	}
}

// TestServerErrorRetriedForReadsOnly: a 500 is retried on another node for a read, final for
// a write.
func TestServerErrorRetriedForReadsOnly(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	broken, ok := newFakeNode(t, store), newFakeNode(t, store)
	if _, err := putOne(ctx, newClient(t, nil, ok), 1); err != nil {
		t.Fatal(err)
	}
	broken.setFault(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusInternalServerError, wire.CodeInternal, "disk on fire", "")
	})
	c := newClient(t, nil, broken, ok)
	if err := getOne(ctx, c, 1); err != nil { // starts at broken
		t.Errorf("read: got %v, want nil after failover", err)
	}
	c = newClient(t, nil, broken, ok) // a fresh rotation and cool-down: starts at broken again
	_, err := putOne(ctx, c, 2)
	if !errors.Is(err, client.ErrInternal) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("write: got %v, want ErrInternal", err)
	}
	if got := broken.hits.Load(); got != 2 {
		t.Errorf("broken node: got %d requests, want 2 (one per call)", got)
	}
}

// TestIndeterminate: nodes that never answer within RequestTimeout make a write indeterminate
// and a read unavailable.
func TestIndeterminate(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	nodes := []*fakeNode{newFakeNode(t, store), newFakeNode(t, store)}
	for _, n := range nodes {
		n.setFault(hang)
	}
	c := newClient(t, func(c *client.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxAttempts = 3
	}, nodes...)

	_, err := putOne(ctx, c, 1)
	if !errors.Is(err, client.ErrIndeterminate) || errors.Is(err, client.ErrUnavailable) {
		t.Errorf("put_cell: got %v, want ErrIndeterminate and not ErrUnavailable", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("put_cell: got %v, want no context.DeadlineExceeded (ctx did not end)", err)
	}
	_, err = c.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: row1, ColumnKey: "A"}, Body: json.RawMessage(`{}`)}})
	if !errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("put_cells: got %v, want ErrIndeterminate", err)
	}
	err = getOne(ctx, c, 1)
	if errors.Is(err, client.ErrIndeterminate) || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("get_cell: got %v, want ErrUnavailable and not ErrIndeterminate", err)
	}
	if h := nodes[0].hits.Load() + nodes[1].hits.Load(); h != 9 {
		t.Errorf("got %d requests, want 9 (3 calls x 3 attempts)", h)
	}
}

// TestIndeterminateThenUnavailable: a write whose first attempt timed out stays indeterminate
// even when the later attempts say 503 (nothing done by them).
func TestIndeterminateThenUnavailable(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	slow, busy := newFakeNode(t, store), newFakeNode(t, store)
	slow.setFault(hang)
	busy.setFault(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, wire.CodeUnavailable, "no leader", "")
	})
	c := newClient(t, func(c *client.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxAttempts = 2
	}, slow, busy)
	_, err := putOne(ctx, c, 1)
	if !errors.Is(err, client.ErrIndeterminate) || errors.Is(err, client.ErrUnavailable) {
		t.Errorf("got %v, want ErrIndeterminate and not ErrUnavailable", err)
	}
	if slow.hits.Load() != 1 || busy.hits.Load() != 1 {
		t.Errorf("got %d and %d requests, want 1 and 1", slow.hits.Load(), busy.hits.Load())
	}
}

// TestTimedOutWriteRetried: a node applies a write but answers too late; the retry on the next
// node reports the cell as existing.
func TestTimedOutWriteRetried(t *testing.T) {
	ctx := context.Background()
	store := newFakeStore()
	slow, ok := newFakeNode(t, store), newFakeNode(t, store)
	// The slow node applies the write through the shared store, then never answers.
	slow.setFault(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/") // /v1/trips/cells/{row}/{col}/{ref}
		k, err := parseKey(parts[4], parts[5], parts[6])
		if err != nil {
			t.Errorf("slow node: %v", err)
		}
		var body json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		enc, _ := cells.EncodeBody(body)
		store.put(k, body, enc)
		hang(w, r)
	})
	c := newClient(t, func(c *client.Config) { c.RequestTimeout = 50 * time.Millisecond }, slow, ok)
	res, err := putOne(ctx, c, 1)
	if err != nil || res.Status != wire.StatusExists {
		t.Errorf("got %+v, %v, want status exists (applied by the timed-out attempt)", res, err)
	}
	if slow.hits.Load() != 1 || ok.hits.Load() != 1 {
		t.Errorf("got %d and %d requests, want 1 and 1", slow.hits.Load(), ok.hits.Load())
	}
}

// Test504 checks that a 504 indeterminate answer is retried, and ends a write indeterminate and
// a read unavailable.
func Test504(t *testing.T) {
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
	var ae *client.APIError
	if !errors.Is(werr, client.ErrIndeterminate) || !errors.As(werr, &ae) || ae.StatusCode != 504 {
		t.Errorf("write: got %v, want ErrIndeterminate from a 504 *APIError", werr)
	}
	rerr := getOne(ctx, c, 1)
	if errors.Is(rerr, client.ErrIndeterminate) || !errors.Is(rerr, client.ErrUnavailable) {
		t.Errorf("read: got %v, want ErrUnavailable and not ErrIndeterminate", rerr)
	}
	if h := nodes[0].hits.Load() + nodes[1].hits.Load(); h != 6 {
		t.Errorf("got %d requests, want 6 (2 calls x 3 attempts)", h)
	}
	// Then a node answers: the write's retry succeeds.
	nodes[1].setFault(nil)
	if _, err := putOne(ctx, c, 1); err != nil {
		t.Errorf("write after 504 then success: got %v, want nil", err)
	}
}

// TestContextCancel: cancelling ctx ends a call promptly with ctx's error; a write in flight is
// also indeterminate, a read is not.
func TestContextCancel(t *testing.T) {
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
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Errorf("write=%v: returned after %s, want promptly after cancel", write, elapsed)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("write=%v: got %v, want context.Canceled", write, err)
		}
		if got := errors.Is(err, client.ErrIndeterminate); got != write {
			t.Errorf("write=%v: got ErrIndeterminate %v, want %v (%v)", write, got, write, err)
		}
		cancel()
	}
}

// TestContextDeadlineDuringBackoff: a ctx deadline during a long Retry-After wait ends the call
// at the deadline; a write whose attempts all said 503 is not indeterminate.
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
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("returned after %s, want at the 100ms deadline", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("got %v, want context.DeadlineExceeded and not ErrIndeterminate", err)
	}
	if got := n.hits.Load(); got != 1 {
		t.Errorf("got %d requests, want 1", got)
	}
}

// TestConcurrent runs 50 goroutines over one client (and WithDatastore copies) while one
// endpoint is down; run it with -race.
func TestConcurrent(t *testing.T) {
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
	errs := make(chan error, workers*4)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := c
			if i%2 == 1 {
				cl = c.WithDatastore(testDatastore)
			}
			row := uuid.New()
			body := json.RawMessage(fmt.Sprintf(`{"worker":%d}`, i))
			if res, err := cl.PutCell(ctx, row, "BASE", int64(i), body); err != nil || res.Status != wire.StatusCreated {
				errs <- fmt.Errorf("worker %d: PutCell: got %+v, %v, want created", i, res, err)
				return
			}
			got, err := cl.GetCellLatest(ctx, row, "BASE", client.WithConsistency(client.ConsistencyStale))
			if err != nil || got.RefKey != int64(i) || !strings.Contains(string(got.Body), fmt.Sprint(i)) {
				errs <- fmt.Errorf("worker %d: GetCellLatest: got %+v, %v, want ref %d", i, got, err, i)
			}
			res, err := cl.PutCells(ctx, []client.CellWrite{{Key: cells.Key{RowKey: shared, ColumnKey: "S", RefKey: 1},
				Body: json.RawMessage(`{"same":true}`)}})
			if err != nil {
				errs <- fmt.Errorf("worker %d: PutCells: %v", i, err)
				return
			}
			if res[0].Status == wire.StatusCreated {
				created.Add(1)
			} else if res[0].Status != wire.StatusExists {
				errs <- fmt.Errorf("worker %d: PutCells: got %q, want created or exists", i, res[0].Status)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := created.Load(); got != 1 {
		t.Errorf("shared cell: got %d writers told created, want exactly 1", got)
	}
	if got := nodes[1].hits.Load() + nodes[2].hits.Load(); got != 3*workers {
		t.Errorf("got %d requests on the live nodes, want %d (3 per worker)", got, 3*workers)
	}
}

// TestAllEndpointsDown: when no node accepts a connection, nothing was sent: a write is
// unavailable, not indeterminate.
func TestAllEndpointsDown(t *testing.T) {
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
	if !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrIndeterminate) {
		t.Errorf("write: got %v, want ErrUnavailable and not ErrIndeterminate", err)
	}
	if err := getOne(ctx, c, 1); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("read: got %v, want ErrUnavailable", err)
	}
	if ca, cb := ct.count(a.URL()), ct.count(b.URL()); ca != 4 || cb != 4 {
		t.Errorf("got %d and %d attempts, want 4 and 4 (alternating)", ca, cb)
	}
}
