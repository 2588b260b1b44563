package bench

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
)

// TestBenchPebbleTarget starts the pebble target (localcluster.Options.Store pebble) and runs
// a tiny put and get-latest on it: every operation answers without an error. It asserts no
// speed.
func TestBenchPebbleTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := Config{Workloads: []string{workloadPut, workloadGetLatest}, Clients: []int{2},
		Consistency: []string{client.ConsistencyStrong}, Ops: 20, Warmup: 100 * time.Millisecond, Duration: time.Hour,
		Batch: 10, ValueSize: 100, Rows: 50, Shards: 8, Partitions: 2, MaxInflight: 8}
	var stderr bytes.Buffer
	env := newEnv(f, io.Discard, &stderr, &runState{})
	defer env.run.repl.close(io.Discard)
	tg, err := startTarget(ctx, targetPebble, env)
	require.NoError(t, err)
	defer tg.Close()
	require.Len(t, tg.Endpoints(), 3)
	assert.True(t, storesCells(tg) && !isSecure(tg))

	rows, err := runTarget(ctx, env, tg)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	require.Len(t, rows, 2, "rows: want put and get-latest")
	for i, r := range rows {
		t.Logf("%+v", r)
		assert.Equal(t, targetPebble, r.Target, "row %d", i)
		assert.Equal(t, int64(0), r.Errors, "row %d %s: errors (first: %s)", i, r.Workload, r.FirstError)
		assert.Equal(t, int64(f.Ops), r.Ops, "row %d %s: ops", i, r.Workload)
	}
}
