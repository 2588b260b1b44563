package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
)

// adminNode is a stand-in node for the admin calls: it answers every request with the next of
// its handlers (the last one repeats) and records what it got.
type adminNode struct {
	srv      *httptest.Server
	mu       sync.Mutex
	handlers []http.HandlerFunc
	got      []string // method, path and query of each request
	bodies   [][]byte
	hits     atomic.Int32
}

func newAdminNode(t *testing.T, handlers ...http.HandlerFunc) *adminNode {
	t.Helper()
	n := &adminNode{handlers: handlers}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(n.hits.Add(1)) - 1
		b, _ := io.ReadAll(r.Body)
		n.mu.Lock()
		n.got = append(n.got, r.Method+" "+r.URL.RequestURI())
		n.bodies = append(n.bodies, b)
		h := n.handlers[min(i, len(n.handlers)-1)]
		n.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *adminNode) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.got...)
}

// answer writes v as JSON with status.
func answer(status int, v any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
}

// apiError answers the API's error body.
func apiError(status int, code, msg, field string) http.HandlerFunc {
	return answer(status, wire.ErrorBody{Error: wire.ErrorDetail{Code: code, Message: msg, Field: field}})
}

// stall holds the request until the client gives up on it (or 10s pass).
func stall(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// checkChangeRetries checks the retries of an admin change that is not idempotent (call,
// sent with a client of two endpoints): answered 503 by the first node (nothing done), it is
// sent again to the second, which answers with ok; answered 504 or timing out, it ends with
// ErrIndeterminate and the second node is not asked.
func checkChangeRetries(t *testing.T, ok http.HandlerFunc, call func(c *client.Client) error) {
	t.Helper()
	for _, tc := range []struct {
		name    string
		first   http.HandlerFunc
		wantErr error // nil: retried on the second node, which answers
	}{
		{"503", apiError(503, wire.CodeUnavailable, "cluster: unavailable: the catalog has no leader", ""), nil},
		{"504", apiError(504, wire.CodeIndeterminate, "context deadline exceeded (the change may have been decided)", ""), client.ErrIndeterminate},
		{"timeout", stall, client.ErrIndeterminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdminNode(t, tc.first)
			b := newAdminNode(t, ok)
			err := call(adminClient(t, a.srv.URL, b.srv.URL))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Zero(t, b.hits.Load(), "the second node must not be asked")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, int32(1), a.hits.Load())
			assert.Equal(t, int32(1), b.hits.Load())
		})
	}
}

// adminClient is a client of the nodes' URLs with fast retries and a short admin timeout.
func adminClient(t *testing.T, urls ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig()
	cfg.Endpoints = urls
	cfg.RequestTimeout = 2 * time.Second
	cfg.AdminTimeout = 300 * time.Millisecond
	cfg.BackoffBase, cfg.BackoffMax = time.Millisecond, 5*time.Millisecond
	c, err := client.New(cfg)
	require.NoError(t, err)
	return c
}

// deadURL is the URL of a listener that was closed: connections to it are refused.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	return u
}

var testConfig = wire.PartitionConfig{Datastore: "trips", Partition: 1, Leader: "n2", Term: 2,
	Servers: []wire.RaftServer{{Node: "n2", Addr: "a2", Suffrage: wire.SuffrageVoter}}}

// TestAdminRequests checks the method, path, query and body of every admin call, and that the
// answers decode into their wire shapes.
func TestAdminRequests(t *testing.T) {
	ctx := context.Background()
	rep := wire.RebalanceReport{Nodes: []string{"n1"}, Moves: []wire.Move{{Datastore: "trips", From: "n1", To: "n2"}}, DryRun: true}
	n := newAdminNode(t,
		answer(200, wire.NodesResponse{Self: "n1", Nodes: []wire.Member{{ID: "n1", State: "alive"}}}),
		answer(200, wire.PartitionsResponse{Partitions: []wire.PartitionReport{{PartitionConfig: testConfig, Mode: "raft"}}}),
		answer(200, wire.PartitionsResponse{}),
		answer(200, testConfig), answer(200, testConfig), answer(200, testConfig), answer(200, testConfig),
		answer(200, rep), answer(200, rep))
	c := adminClient(t, n.srv.URL)

	nodes, err := c.Nodes(ctx)
	require.NoError(t, err)
	assert.Equal(t, wire.NodesResponse{Self: "n1", Nodes: []wire.Member{{ID: "n1", State: "alive"}}}, nodes)
	parts, err := c.Partitions(ctx, "trips")
	require.NoError(t, err)
	assert.Equal(t, []string{"n2"}, parts[0].Voters())
	parts, err = c.Partitions(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, []wire.PartitionReport{}, parts, "no partitions: an empty slice")
	for _, call := range []func() (wire.PartitionConfig, error){
		func() (wire.PartitionConfig, error) { return c.AddVoter(ctx, "trips", 1, "n4") },
		func() (wire.PartitionConfig, error) { return c.RemoveVoter(ctx, "trips", 1, "n/3") },
		func() (wire.PartitionConfig, error) { return c.TransferLeader(ctx, "trips", 1, "") },
		func() (wire.PartitionConfig, error) { return c.MoveReplica(ctx, "trips", 1, "n1", "n4") },
	} {
		cfg, err := call()
		require.NoError(t, err)
		assert.Equal(t, testConfig, cfg)
	}
	got, err := c.Rebalance(ctx, wire.RebalanceRequest{Datastore: "trips", Exclude: []string{"n3"}, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, rep, got)
	got, err = c.Drain(ctx, "n1", false)
	require.NoError(t, err)
	assert.Equal(t, rep, got)

	assert.Equal(t, []string{
		"GET /v1/admin/nodes",
		"GET /v1/admin/partitions?datastore=trips",
		"GET /v1/admin/partitions",
		"POST /v1/admin/partitions/trips/1/voters",
		"DELETE /v1/admin/partitions/trips/1/voters/n%2F3",
		"POST /v1/admin/partitions/trips/1/leader",
		"POST /v1/admin/partitions/trips/1/move",
		"POST /v1/admin/rebalance",
		"POST /v1/admin/nodes/n1/drain",
	}, n.requests())
	var bodies []string
	for _, b := range n.bodies {
		bodies = append(bodies, string(b))
	}
	assert.Equal(t, []string{"", "", "", `{"node":"n4"}`, "", `{"node":""}`, `{"from":"n1","to":"n4"}`,
		`{"datastore":"trips","exclude":["n3"],"dry_run":true}`, `{"dry_run":false}`}, bodies)
}

// TestAdminErrors: the API's error body becomes an *APIError with its sentinel; a missing
// argument is refused unsent; an answer about another partition is ErrBadResponse.
func TestAdminErrors(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t,
		apiError(404, wire.CodeNotFound, `cluster: unknown node: "n9"`, "node"),
		apiError(409, wire.CodeConflict, "cluster: admin operation refused: n9 is not a voter of trips/0", ""),
		apiError(400, wire.CodeInvalidArgument, `partition: "-1" is not a partition number`, "partition"),
		answer(200, testConfig))
	c := adminClient(t, n.srv.URL)

	_, err := c.AddVoter(ctx, "trips", 0, "n9")
	var ae *client.APIError
	require.ErrorAs(t, err, &ae)
	assert.ErrorIs(t, err, client.ErrNotFound)
	assert.Equal(t, client.APIError{StatusCode: 404, Code: wire.CodeNotFound, Message: `cluster: unknown node: "n9"`, Field: "node",
		Endpoint: n.srv.URL}, *ae)
	_, err = c.TransferLeader(ctx, "trips", 0, "n9")
	assert.ErrorIs(t, err, client.ErrConflict)
	_, err = c.RemoveVoter(ctx, "trips", -1, "n2")
	assert.ErrorIs(t, err, client.ErrInvalidArgument)
	_, err = c.AddVoter(ctx, "trips", 0, "n2") // answers trips/1
	assert.ErrorIs(t, err, client.ErrBadResponse)
	assert.Equal(t, int32(4), n.hits.Load(), "each error is final: one request per call")

	for name, call := range map[string]func() error{
		"AddVoter without node":  func() error { _, err := c.AddVoter(ctx, "trips", 0, ""); return err },
		"RemoveVoter without ds": func() error { _, err := c.RemoveVoter(ctx, "", 0, "n1"); return err },
		"MoveReplica without to": func() error { _, err := c.MoveReplica(ctx, "trips", 0, "n1", ""); return err },
		"Drain without node":     func() error { _, err := c.Drain(ctx, "", true); return err },
		"Backup without ds":      func() error { _, err := c.Backup(ctx, "", 0, io.Discard); return err },
		"Restore with a bad size": func() error {
			_, err := c.Restore(ctx, "trips", 0, bytes.NewReader(nil), -1, client.RestoreOptions{})
			return err
		},
	} {
		assert.ErrorIs(t, call(), client.ErrInvalidArgument, name)
	}
	assert.Equal(t, int32(4), n.hits.Load(), "refused calls are not sent")
}

// TestAdminChangeRetries: a change is retried, on the next endpoint, only when it certainly did
// not start (refused connection, 503); after a timeout, a 504 or a 500 it ends at once, unless
// the caller declared it idempotent. Reads are retried as reads.
func TestAdminChangeRetries(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		first      http.HandlerFunc
		idempotent bool
		wantErr    error // nil: the retry on the second node succeeds
	}{
		{"503", apiError(503, wire.CodeUnavailable, "no leader", ""), false, nil},
		{"timeout", stall, false, client.ErrIndeterminate},
		{"504", apiError(504, wire.CodeIndeterminate, "may still commit", ""), false, client.ErrIndeterminate},
		{"500", apiError(500, wire.CodeInternal, "boom", ""), false, client.ErrInternal},
		{"timeout idempotent", stall, true, nil},
		{"504 idempotent", apiError(504, wire.CodeIndeterminate, "may still commit", ""), true, nil},
		{"500 idempotent", apiError(500, wire.CodeInternal, "boom", ""), true, nil},
		{"409 idempotent", apiError(409, wire.CodeConflict, "refused", ""), true, client.ErrConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newAdminNode(t, tc.first), newAdminNode(t, answer(200, testConfig))
			c := adminClient(t, a.srv.URL, b.srv.URL)
			var opts []client.AdminOption
			if tc.idempotent {
				opts = append(opts, client.AdminIdempotent())
			}
			var via string
			cfg, err := c.AddVoter(ctx, "trips", 1, "n4", append(opts, client.AdminEndpoint(&via))...)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Equal(t, int32(0), b.hits.Load(), "the second node must not be asked")
				assert.Equal(t, a.srv.URL, via)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, testConfig, cfg)
			assert.Equal(t, int32(1), a.hits.Load())
			assert.Equal(t, int32(1), b.hits.Load())
			assert.Equal(t, b.srv.URL, via, "the endpoint of the last attempt")
		})
	}
	t.Run("refused connection", func(t *testing.T) {
		b := newAdminNode(t, answer(200, wire.RebalanceReport{DryRun: true}))
		c := adminClient(t, deadURL(t), b.srv.URL)
		rep, err := c.Rebalance(ctx, wire.RebalanceRequest{})
		require.NoError(t, err)
		assert.True(t, rep.DryRun)
	})
	t.Run("every endpoint unavailable", func(t *testing.T) {
		a := newAdminNode(t, apiError(503, wire.CodeUnavailable, "no leader", ""))
		c := adminClient(t, deadURL(t), a.srv.URL)
		_, err := c.Drain(ctx, "n1", true)
		require.ErrorIs(t, err, client.ErrUnavailable)
		assert.NotErrorIs(t, err, client.ErrIndeterminate, "nothing was done")
		assert.Equal(t, int32(client.DefaultMaxAttempts/2), a.hits.Load(), "the attempts alternate between the endpoints")
	})
	t.Run("read after a timeout", func(t *testing.T) {
		a := newAdminNode(t, stall)
		b := newAdminNode(t, answer(200, wire.NodesResponse{Self: "n2"}))
		cfg := client.DefaultConfig()
		cfg.Endpoints, cfg.RequestTimeout, cfg.BackoffBase, cfg.BackoffMax = []string{a.srv.URL, b.srv.URL}, 200*time.Millisecond, time.Millisecond, time.Millisecond
		c, err := client.New(cfg)
		require.NoError(t, err)
		nodes, err := c.Nodes(ctx)
		require.NoError(t, err)
		assert.Equal(t, "n2", nodes.Self)
	})
}

// backupStream answers a backup of body with the API's headers and trailers; sum, when not
// empty, replaces the body's SHA-256 in the trailer.
func backupStream(body []byte, sum string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if sum == "" {
			s := sha256.Sum256(body)
			sum = hex.EncodeToString(s[:])
		}
		h := w.Header()
		h.Set("Trailer", wire.TrailerCells+", "+wire.TrailerKVRows+", "+wire.TrailerIndexEntries+", "+wire.TrailerBytes+", "+wire.TrailerSHA256)
		h.Set(wire.HeaderSnapshotVersion, "3")
		h.Set(wire.HeaderFirstShard, "8")
		h.Set(wire.HeaderLastShard, "15")
		h.Set(wire.HeaderAppliedIndex, "18")
		h.Set(wire.HeaderAppliedTerm, "2")
		w.WriteHeader(200)
		_, _ = w.Write(body)
		h.Set(wire.TrailerCells, "10")
		h.Set(wire.TrailerKVRows, "1")
		h.Set(wire.TrailerIndexEntries, "0")
		h.Set(wire.TrailerBytes, strconv.Itoa(len(body)))
		h.Set(wire.TrailerSHA256, sum)
	}
}

// brokenStream starts a backup and aborts it half way, as the server does when the backup
// fails after the stream started.
func brokenStream(body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", wire.TrailerSHA256)
		w.WriteHeader(200)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

func TestBackupStream(t *testing.T) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("snapshot "), 10000)
	sum := sha256.Sum256(body)

	a := newAdminNode(t, apiError(503, wire.CodeUnavailable, "no leader", ""))
	b := newAdminNode(t, backupStream(body, ""))
	c := adminClient(t, a.srv.URL, b.srv.URL)
	var out bytes.Buffer
	info, err := c.Backup(ctx, "trips", 1, &out)
	require.NoError(t, err)
	assert.Equal(t, body, out.Bytes())
	assert.Equal(t, wire.BackupInfo{SnapshotVersion: 3, FirstShard: 8, LastShard: 15, AppliedIndex: 18, AppliedTerm: 2,
		Trailers: true, Cells: 10, KVRows: 1, Bytes: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}, info)
	assert.Equal(t, []string{"GET /v1/admin/backup/trips/1"}, b.requests())

	t.Run("checksum mismatch", func(t *testing.T) {
		n := newAdminNode(t, backupStream(body, "00ff"))
		_, err := adminClient(t, n.srv.URL).Backup(ctx, "trips", 1, io.Discard)
		require.ErrorIs(t, err, client.ErrBadResponse)
	})
	t.Run("broken stream is not retried", func(t *testing.T) {
		a, b := newAdminNode(t, brokenStream(body)), newAdminNode(t, backupStream(body, ""))
		var out bytes.Buffer
		_, err := adminClient(t, a.srv.URL, b.srv.URL).Backup(ctx, "trips", 1, &out)
		require.ErrorIs(t, err, client.ErrUnavailable)
		assert.Equal(t, int32(0), b.hits.Load(), "w holds part of a stream: no other attempt")
		assert.Less(t, out.Len(), len(body))
	})
	t.Run("writer error", func(t *testing.T) {
		n := newAdminNode(t, backupStream(body, ""))
		errFull := io.ErrShortWrite
		_, err := adminClient(t, n.srv.URL).Backup(ctx, "trips", 1, failingWriter{errFull})
		require.ErrorIs(t, err, errFull)
	})
	t.Run("not found", func(t *testing.T) {
		n := newAdminNode(t, apiError(404, wire.CodeNotFound, "no partition 7", ""))
		_, err := adminClient(t, n.srv.URL).Backup(ctx, "trips", 7, io.Discard)
		require.ErrorIs(t, err, client.ErrNotFound)
	})
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

func TestRestoreRequests(t *testing.T) {
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 100000)
	res := wire.RestoreResult{Datastore: "trips", Partition: 1, Cells: 10, Bytes: int64(len(body))}

	// A 503 resends the whole body to the next node.
	a := newAdminNode(t, apiError(503, wire.CodeUnavailable, "no leader", ""))
	b := newAdminNode(t, answer(200, res))
	c := adminClient(t, a.srv.URL, b.srv.URL)
	got, err := c.Restore(ctx, "trips", 1, bytes.NewReader(body), int64(len(body)), client.RestoreOptions{Force: true})
	require.NoError(t, err)
	assert.Equal(t, res, got)
	assert.Equal(t, []string{"POST /v1/admin/restore/trips/1?force=true"}, b.requests())
	assert.Equal(t, body, b.bodies[0])
	assert.Equal(t, body, a.bodies[0])

	t.Run("504 is final", func(t *testing.T) {
		a := newAdminNode(t, apiError(504, wire.CodeIndeterminate, "handed to raft", ""))
		b := newAdminNode(t, answer(200, res))
		_, err := adminClient(t, a.srv.URL, b.srv.URL).Restore(ctx, "trips", 1, bytes.NewReader(body), int64(len(body)), client.RestoreOptions{})
		require.ErrorIs(t, err, client.ErrIndeterminate)
		assert.Equal(t, int32(0), b.hits.Load())
		assert.Equal(t, []string{"POST /v1/admin/restore/trips/1"}, a.requests(), "no force")
	})
	t.Run("conflict", func(t *testing.T) {
		a := newAdminNode(t, apiError(409, wire.CodeConflict, "holds cells (add force=true to replace them)", ""))
		_, err := adminClient(t, a.srv.URL).Restore(ctx, "trips", 1, bytes.NewReader(body), int64(len(body)), client.RestoreOptions{})
		require.ErrorIs(t, err, client.ErrConflict)
	})
}

func TestClientMetric(t *testing.T) {
	ctx := context.Background()
	n := newAdminNode(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"+
			"# TYPE process_resident_memory_bytes gauge\n"+
			"process_resident_memory_bytes_total{x=\"y\"} 1\n"+
			"process_resident_memory_bytes 1.2345e+08\n"+
			"go_goroutines NaNx\n")
	})
	c := adminClient(t, "http://127.0.0.1:1")
	v, err := c.Metric(ctx, n.srv.URL, "process_resident_memory_bytes")
	require.NoError(t, err)
	assert.Equal(t, 1.2345e+08, v)
	_, err = c.Metric(ctx, n.srv.URL, "nope")
	assert.ErrorIs(t, err, client.ErrNotFound)
	_, err = c.Metric(ctx, n.srv.URL, "go_goroutines")
	assert.ErrorIs(t, err, client.ErrBadResponse)
	_, err = c.Metric(ctx, deadURL(t), "process_resident_memory_bytes")
	assert.ErrorIs(t, err, client.ErrUnavailable)
	assert.Equal(t, int32(3), n.hits.Load(), "one attempt each")
}
