package triggers_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/consumer"
	"github.com/schemaless-db/schemaless/internal/clustertest"
	"github.com/schemaless-db/schemaless/triggers"
)

// heldSource is a Source whose first read of shard from location at (0: none) gets its
// answer and then waits until release is closed before returning it, as a read on its way
// while the worker's state changes; held is closed once that answer is in. Its park commands
// fail while failParks is set.
type heldSource struct {
	triggers.Source
	shard     int
	at        atomic.Int64
	once      sync.Once
	held      chan struct{}
	release   chan struct{}
	failParks atomic.Bool
}

func (s *heldSource) ReadLogs(ctx context.Context, req triggers.LogRead) ([]triggers.Page, error) {
	hold := false
	for _, sl := range req.Shards {
		if at := s.at.Load(); at > 0 && sl.Shard == s.shard && sl.Location == at {
			s.once.Do(func() { hold = true })
		}
	}
	if !hold {
		return s.Source.ReadLogs(ctx, req)
	}
	pages, err := s.Source.ReadLogs(context.WithoutCancel(ctx), req)
	close(s.held)
	<-s.release
	return pages, err
}

func (s *heldSource) GroupCommand(ctx context.Context, group string, cmd consumer.Command) (consumer.Result, error) {
	if cmd.Op == consumer.OpPark && s.failParks.Load() {
		return consumer.Result{}, errors.New("park refused by the test")
	}
	return s.Source.GroupCommand(ctx, group, cmd)
}

// TestPipelineRereadsAfterAFailedPage: with pages of a shard in delivery at once, the read of
// the shard's next page starts past the page in delivery. When that page is not delivered (its
// handler fails and parking its cell fails too) while the read is on its way, the read's
// answer is dropped and the shard is read again from its offset: the failed page's cells are
// delivered, not skipped. Taking the answer (an empty page, its location past the failed page)
// moved the offset past cells no one delivered; the check is shown failing that way.
func TestPipelineRereadsAfterAFailedPage(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, clustertest.Options{Shards: shards})
	cl := newClient(t, c.URLs()...)
	const shard = 5
	var batch []client.CellWrite
	for range 5 {
		batch = append(batch, client.CellWrite{Key: cells.Key{RowKey: rowIn(shard), ColumnKey: "BASE", RefKey: 1}, Body: json.RawMessage(`{}`)})
	}
	res, err := cl.PutCells(context.Background(), batch)
	require.NoError(t, err, "write 5 cells of shard %d", shard)
	src := &heldSource{Source: cl.TriggerSource(), shard: shard, held: make(chan struct{}), release: make(chan struct{})}
	src.at.Store(res[len(res)-1].AddedID) // the read past the first page, which holds the 5 cells
	src.failParks.Store(true)

	var (
		mu        sync.Mutex
		pages     int
		delivered = map[uuid.UUID]bool{}
	)
	firstEnded := make(chan struct{})
	page := func(ctx context.Context, s int, cs []cells.Cell) error {
		if s != shard {
			return nil
		}
		mu.Lock()
		pages++
		first := pages == 1
		mu.Unlock()
		if first {
			<-src.held // the next read has its answer, still on its way
			return errors.New("first page refused by the test")
		}
		mu.Lock()
		for _, c := range cs {
			delivered[c.RowKey] = true
		}
		mu.Unlock()
		return nil
	}
	cell := func(ctx context.Context, c cells.Cell) error {
		if src.failParks.Load() {
			return errors.New("cell refused by the test")
		}
		return page(ctx, shard, []cells.Cell{c})
	}
	cfg := baseConfig(t, nil, "reread", "w")
	cfg.Source, cfg.MaxAttempts = src, 1
	cfg.Pipeline, cfg.PipelineDepth = true, 2
	cfg.OnPage = func(s int, cs []cells.Cell) any { return s }
	cfg.OnPageEnd = func(token any) {
		if token == shard {
			select {
			case <-firstEnded:
			default:
				close(firstEnded)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- triggers.RunPages(ctx, cfg, page, cell) }()
	var released sync.Once
	release := func() { released.Do(func() { close(src.release) }) }
	t.Cleanup(func() { release(); cancel(); <-done }) // a held read ends even when the test fails first

	select {
	case <-firstEnded:
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the first page of the shard did not end")
	}
	time.Sleep(100 * time.Millisecond) // its delivery ends: no page of the shard is in delivery
	src.failParks.Store(false)
	release()
	assert.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range batch {
			if !delivered[w.Key.RowKey] {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "the failed page's cells delivered once the shard is read again")
	st, err := cl.GroupStatus(context.Background(), "reread")
	require.NoError(t, err, "the group's status")
	assert.Empty(t, st.Parked, "no cell parked")
}
