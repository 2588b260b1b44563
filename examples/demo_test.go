package examples_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/examples"
	"github.com/schemaless-db/schemaless/internal/clustertest"
)

// syncBuffer is a bytes.Buffer safe for the groups' goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The apps of `schemaless dev` on a real cluster with index maintainers: started, then an
// import of 300 flights read back, the groups caught up with the right cells, the index caught
// up with the example queries right, and the Docstore flow; no check fails.
func TestDemo(t *testing.T) {
	c := clustertest.Start(t, clustertest.Options{Indexes: true})
	cfg := client.DefaultConfig()
	cfg.Endpoints, cfg.Datastore = c.URLs(), "trips"
	cl, err := client.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out syncBuffer
	demo, err := examples.StartDemo(ctx, examples.DemoConfig{Client: cl, Out: &out, Triggers: true, Index: true, Schema: true,
		Logger: slog.New(slog.DiscardHandler), LogPath: "triggers.log"})
	require.NoError(t, err)
	defer demo.Stop()
	imported := false
	err = demo.Import(ctx, sampleFlights, sampleAirports, 300, func(ctx context.Context) (examples.ImportStats, error) {
		imported = true
		return examples.ImportFlights(ctx, cl, sampleFlights, sampleAirports, examples.ImportOptions{Batch: 100, Concurrency: 4, Limit: 300})
	})
	t.Log(out.String())
	require.NoError(t, err, "Import")
	assert.True(t, imported, "the import function ran")
	for _, want := range []string{
		"triggers: groups billing (BASE -> STATUS), delay-compensation (BASE -> FARE_ADJUSTMENT)",
		"index flights_by_origin version 1",
		"schema of BASE version 1 registered",
		"imported 300 flights",
		"read back 300 cells (strong)",
		"read back 300 cells (stale)",
		"trigger check of 300 flights",
		"index flights_by_origin: every flight indexed",
		"no gap: ok",
	} {
		assert.Contains(t, out.String(), want)
	}
	for _, bad := range []string{"not caught up", "trigger check failed", "check trigger cells", "after the import (state"} {
		assert.False(t, strings.Contains(out.String(), bad), "a failed check: %q in the output", bad)
	}
	assert.Contains(t, out.String(), "STATUS missing 0, wrong 0", "every flight billed")
	assert.Contains(t, out.String(), "one snapshot (partition ", "the booking read back")

	sts, err := cl.GroupStatuses(ctx)
	require.NoError(t, err, "GroupStatuses")
	members := map[string]int{}
	for _, st := range sts {
		members[st.Group] = len(st.Members)
	}
	assert.Equal(t, examples.Workers, members["billing"], "billing's members in %v", members)
	assert.Equal(t, examples.Workers, members["delay-compensation"], "delay-compensation's members in %v", members)

	// An import that fails is the error, and nothing is checked.
	out = syncBuffer{}
	err = demo.Import(ctx, sampleFlights, sampleAirports, 10, func(context.Context) (examples.ImportStats, error) {
		return examples.ImportStats{}, examples.ErrImportOptions
	})
	assert.ErrorIs(t, err, examples.ErrImportOptions)
	assert.ErrorContains(t, err, "import: ")
	assert.Empty(t, out.String(), "nothing printed after a failed import")
}
