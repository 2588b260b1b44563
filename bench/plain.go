package bench

// The plain client of put, put-batch and get-latest (--client plain): the requests curl in a
// loop or a Python program would send, beside the Go client's (package client).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/wire"
)

// Values of --client.
const (
	// clientGo is package client, as an application uses it: a request goes to the leader of
	// its partition when the client knows it (Schemaless-Leader hints), failed attempts are
	// retried with backoff, and every write carries an Idempotency-Key.
	clientGo = "go"
	// clientPlain is plainClient.
	clientPlain = "plain"
)

// benchDatastore is the datastore the load workloads write and read.
const benchDatastore = "trips"

// hasPlainClient reports whether workload name can run with the plain client: put, put-batch
// and get-latest.
func hasPlainClient(name string) bool {
	return name == workloadPut || name == workloadPutBatch || name == workloadGetLatest
}

// clientKinds are the --client values of f, go when none is given.
func clientKinds(f Config) []string {
	if len(f.ClientKinds) == 0 {
		return []string{clientGo}
	}
	return f.ClientKinds
}

// namesClient reports whether the rows of f's load runs name their client (Result.Client):
// when a --client value is not go, so that the rows of the default stay as they were.
func namesClient(f Config) bool {
	for _, k := range clientKinds(f) {
		if k != clientGo {
			return true
		}
	}
	return false
}

// plainClient sends the requests of put, put-batch and get-latest as curl in a loop (with
// keep-alive) or a Python requests.Session would: each request goes with net/http to a node
// picked at random among the endpoints, with the JSON body a user would write, a Content-Type
// of application/json, the bearer token on a secure target and nothing else: no
// Idempotency-Key, no leader routing, no retry, no redirect followed. A transport error or an
// answer other than 2xx is the request's error; the body of a 2xx answer is read to its end
// and not decoded. Connections are kept alive: HTTP/1.1 over http, and over https what the TLS
// handshake agrees (the nodes offer HTTP/2 by ALPN, which curl takes too). Its methods are safe
// for concurrent use.
type plainClient struct {
	endpoints []string // base URLs, without a trailing slash
	http      *http.Client
	token     string
}

// newPlainClient returns a plain client of endpoints for clients concurrent requests, keeping
// up to clients+16 idle connections per node, or with conns > 0 at most conns connections per
// node (requests wait for a free one), presenting auth. It fails when endpoints is empty.
func newPlainClient(endpoints []string, clients, conns int, auth clientAuth) (*plainClient, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("bench: the plain client needs at least one endpoint")
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	if auth.tls != nil {
		t.TLSClientConfig = auth.tls.Clone()
	}
	t.MaxIdleConnsPerHost = clients + 16
	t.MaxIdleConns = len(endpoints) * t.MaxIdleConnsPerHost
	if conns > 0 {
		t.MaxConnsPerHost = conns
		t.MaxIdleConnsPerHost = conns
		t.MaxIdleConns = len(endpoints) * conns
	}
	eps := make([]string, len(endpoints))
	for i, e := range endpoints {
		eps[i] = strings.TrimRight(e, "/")
	}
	return &plainClient{endpoints: eps, token: auth.token, http: &http.Client{
		Transport:     t,
		Timeout:       requestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// op does one request of workload (put, put-batch or get-latest, per consistency, of a random
// row of rows) with rng, and returns the cells it wrote or read.
func (p *plainClient) op(ctx context.Context, workload, consistency string, rows []uuid.UUID, rng *rand.Rand, f Config) (int, error) {
	switch workload {
	case workloadPut:
		k := cellKey(uuid.New())
		return 1, p.do(ctx, rng, http.MethodPut, cellPath(k), benchBody(rng, f.ValueSize))
	case workloadPutBatch:
		req := wire.PutCellsRequest{Cells: make([]wire.PutCell, f.Batch)}
		for i := range req.Cells {
			k := cellKey(uuid.New())
			req.Cells[i] = wire.PutCell{RowKey: k.RowKey.String(), ColumnKey: k.ColumnKey,
				RefKey: json.Number(strconv.FormatInt(k.RefKey, 10)), Body: benchBody(rng, f.ValueSize)}
		}
		body, err := json.Marshal(req)
		if err != nil {
			return f.Batch, fmt.Errorf("bench: plain put_cells: %w", err)
		}
		return f.Batch, p.do(ctx, rng, http.MethodPost, "/v1/"+benchDatastore+"/cells", body)
	case workloadGetLatest:
		k := cellKey(rows[rng.IntN(len(rows))])
		path := "/v1/" + benchDatastore + "/cells/" + k.RowKey.String() + "/" + k.ColumnKey
		if consistency != "" {
			path += "?" + url.Values{"consistency": {consistency}}.Encode()
		}
		return 1, p.do(ctx, rng, http.MethodGet, path, nil)
	}
	return 0, fmt.Errorf("bench: the plain client has no workload %s", workload)
}

// cellPath is put_cell's path of k: /v1/trips/cells/{row_key}/{column_key}/{ref_key}.
func cellPath(k cells.Key) string {
	return "/v1/" + benchDatastore + "/cells/" + k.RowKey.String() + "/" + k.ColumnKey + "/" + strconv.FormatInt(k.RefKey, 10)
}

// do sends one request (body nil: none) to a node picked with rng and returns an error for a
// transport failure or an answer other than 2xx (its status and the start of its body). It
// reads every answer to its end, so that the connection serves the next request.
func (p *plainClient) do(ctx context.Context, rng *rand.Rand, method, path string, body []byte) error {
	u := p.endpoints[rng.IntN(len(p.endpoints))] + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return fmt.Errorf("bench: plain %s %s: %w", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return fmt.Errorf("bench: plain %s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return fmt.Errorf("bench: plain %s %s: read the answer: %w", method, u, err)
		}
		return nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	_, _ = io.Copy(io.Discard, resp.Body)
	return fmt.Errorf("bench: plain %s %s: %s: %s", method, u, resp.Status, bytes.TrimSpace(head))
}

// loadOpOf returns the request function of one run of workload with client kind (go or
// plain) for n clients, on endpoints presenting auth.
func loadOpOf(kind, workload, consistency string, endpoints []string, auth clientAuth, n int, rows []uuid.UUID, f Config) (benchOpFunc, error) {
	if kind == clientPlain {
		p, err := newPlainClient(endpoints, n, f.Connections, auth)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, rng *rand.Rand) (int, error) {
			return p.op(ctx, workload, consistency, rows, rng, f)
		}, nil
	}
	cl, err := newClientConns(endpoints, n, f.Connections, auth)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, rng *rand.Rand) (int, error) {
		return loadOp(ctx, cl, workload, consistency, rows, rng, f)
	}, nil
}
