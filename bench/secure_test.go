package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchSecureTarget starts sqlite-secure and checks that its endpoints are https, that its
// clients trust its CA and send the app token (a tiny run of put and get-latest answers
// without an error), that a client without the token is refused with 401 and one without the
// CA fails its handshake, and that a workload without token support is skipped with a note. It
// asserts no speed.
func TestBenchSecureTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := Config{Workloads: []string{workloadPut, workloadGetLatest, workloadLogRead}, Clients: []int{2},
		Consistency: []string{client.ConsistencyStrong}, Ops: 20, Warmup: 100 * time.Millisecond, Duration: time.Hour,
		Batch: 10, ValueSize: 100, Rows: 50, Shards: 8, Partitions: 2, MaxInflight: 8}
	var stderr bytes.Buffer
	env := newEnv(f, io.Discard, &stderr, &runState{})
	defer env.run.repl.close(io.Discard)
	tg, err := startTarget(ctx, targetSQLite+secureSuffix, env)
	require.NoError(t, err)
	defer tg.Close()

	require.Len(t, tg.Endpoints(), 3)
	for _, ep := range tg.Endpoints() {
		assert.True(t, strings.HasPrefix(ep, "https://"), "endpoint %s: want https", ep)
	}
	auth := targetAuth(tg)
	require.NotNil(t, auth.tls, "secure target's clients: want a TLS config")
	assert.NotNil(t, auth.tls.RootCAs, "secure target's clients: want the bundle's CA trusted")
	assert.NotEmpty(t, auth.token, "secure target's clients: want the app token")
	assert.True(t, isSecure(tg) && storesCells(tg))

	rows, err := runTarget(ctx, env, tg)
	require.NoError(t, err)
	require.Len(t, rows, 2, "rows: want put and get-latest (log-read skipped)")
	for i, r := range rows {
		t.Logf("%+v", r)
		assert.Equal(t, targetSQLite+secureSuffix, r.Target, "row %d", i)
		assert.Equal(t, int64(0), r.Errors, "row %d %s: errors (first: %s)", i, r.Workload, r.FirstError)
		assert.Equal(t, int64(f.Ops), r.Ops, "row %d %s: ops", i, r.Workload)
	}
	assert.Contains(t, stderr.String(), "log-read does not run on a secure target")

	key := cellKey(env.rows[0])
	noToken, err := newClientConns(tg.Endpoints(), 1, 0, clientAuth{tls: auth.tls})
	require.NoError(t, err)
	_, err = noToken.GetCellLatest(ctx, key.RowKey, key.ColumnKey)
	var ae *client.APIError
	require.True(t, errors.As(err, &ae), "get without a token: got %v, want an APIError", err)
	assert.Equal(t, http.StatusUnauthorized, ae.StatusCode, "get without a token: status")

	noCA, err := newClientConns(tg.Endpoints(), 1, 0, clientAuth{token: auth.token})
	require.NoError(t, err)
	_, err = noCA.GetCellLatest(ctx, key.RowKey, key.ColumnKey)
	require.Error(t, err, "get without the CA: want a TLS failure")
	assert.Contains(t, err.Error(), "certificate", "get without the CA: got %v", err)
}

// TestBenchSecureTargetUnknown checks that only sqlite, pebble, mysql and raft-noop have a secure
// variant.
func TestBenchSecureTargetUnknown(t *testing.T) {
	env := testEnv(Config{})
	for _, name := range []string{targetAsync + secureSuffix, targetExternal + secureSuffix, "secure"} {
		_, err := startTarget(context.Background(), name, env)
		require.Error(t, err, "target %s", name)
		assert.Contains(t, err.Error(), "--target", "target %s: got %v", name, err)
	}
}
