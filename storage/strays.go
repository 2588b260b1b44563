package storage

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/cells"
)

// Stray shard tables (SQLite). A split leaves the right half's tables in the parent's file and
// the left half's in the right half's (a clone of the parent's file): dropping them inside the
// split's transaction paused the parent's writes for the whole drop (about 150 ms for 250,000
// cells), and a shard's table is worthless to a partition once its range excludes the shard.
// So a partition's tables of shards outside its range are strays, dropped after the split, one
// table at a time, each under the writer token taken between two of the state machine's
// transactions, a second after the split and 50 ms apart (strayDelay, strayPace): a write
// waits for one table's DROP at most, not for all of them, and the split's first writes for
// none.
//
// The range is the truth: a SQLite partition's range is set (SetShards) from the range its
// file stores, and a table the file holds outside it is left by a split (or by a snapshot of
// a wider range installed over it) and never read again. Two cases hold tables outside the
// range on purpose and are kept from the sweep: a frozen partition (an empty range), whose
// tables a merge is about to take, and a merge's left partition between the commit that took
// the right one's tables and the state machine's SetShards, which Commit covers by widening
// the range itself (WriteTx.absorbed). A merge that brings a shard back drops the shard's
// stray tables before it copies the shard in (absorbAttached, copySQLiteShards); a restore
// empties every shard of its range and drops its index tables first.

// strayWait is how long a writer call waits for the writer token while the stray sweeper holds
// it for one DROP TABLE, before it gives up with ErrTxOpen.
const strayWait = 30 * time.Second

// A sweep waits strayDelay before its first drop and strayPace between two drops. A drop holds
// the writer for 5 to 30 ms on a loaded node; a sweep that took the token between every two of
// the state machine's transactions made every write wait for a drop while it lasted, and it
// started the moment a split gave a half its range: the new partition's first writes, those of
// the moved shards that waited for the split, took 117 ms at the median (184 at most) from
// the parent's refusal to their answer, against 37 (72) with the sweep put off
// (BENCHMARKS.md). Strays cost only disk space while they wait.
const (
	strayDelay = time.Second
	strayPace  = 50 * time.Millisecond
)

// straySweeper drops a SQLite partition's stray tables in the background (see above).
type straySweeper struct {
	// holding is set while the sweeper tries to take, or holds, the writer token: a writer
	// call that finds the token held then waits for it (lockWriter).
	holding atomic.Bool
	mu      sync.Mutex
	running bool          // a sweep goroutine runs; guarded by mu
	again   bool          // SetShards was called during the sweep: look again; guarded by mu
	closed  bool          // Close stopped the sweeps: none starts again; guarded by mu
	stop    chan struct{} // closed by Close; guarded by mu
	done    sync.WaitGroup
	dropped atomic.Int64 // tables dropped since the partition was opened
}

// kickStrays starts a sweep of p's stray tables unless one runs (which then looks again
// before it ends). SQLite only, and not for an empty range (a frozen partition).
func (p *PartitionStore) kickStrays(r cells.ShardRange) {
	if p.d == nil || p.d.engine != EngineSQLite || p.pb != nil || r.Len() == 0 {
		return
	}
	s := &p.strays
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if s.running {
		s.again = true
		return
	}
	if s.stop == nil {
		s.stop = make(chan struct{})
	}
	s.running, s.again = true, false
	s.done.Add(1)
	go p.sweepStrays()
}

// sweepStrays drops p's stray tables one at a time, strayDelay after it starts and strayPace
// apart, until none is left, p closes, or a drop fails (the next SetShards, or the next open,
// tries again).
func (p *PartitionStore) sweepStrays() {
	s := &p.strays
	defer s.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	wait := strayDelay
	for {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
		wait = strayPace
		dropped, err := p.dropOneStray(ctx)
		if err == nil && dropped {
			continue
		}
		s.mu.Lock()
		if err == nil && s.again && !s.closed {
			s.again = false
			s.mu.Unlock()
			continue
		}
		s.running = false
		s.mu.Unlock()
		return
	}
}

// dropOneStray drops one table of p's file whose shard is outside p's range, under the writer
// token, and reports whether it dropped one. When the token is held by a writer, it waits for
// it to be released (polling every millisecond), so that it runs between two transactions.
func (p *PartitionStore) dropOneStray(ctx context.Context) (bool, error) {
	s := &p.strays
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.holding.Store(true)
		select {
		case p.writer <- struct{}{}:
		default:
			s.holding.Store(false)
			select {
			case <-time.After(time.Millisecond):
			case <-ctx.Done():
			}
			continue
		}
		break
	}
	defer func() {
		p.unlockWriter()
		s.holding.Store(false)
	}()
	r := p.Shards()
	if r.Len() == 0 {
		return false, nil
	}
	held, err := sqliteSchema(ctx, p.write, "main")
	if err != nil {
		return false, p.fail("strays: list the partition's tables", err)
	}
	for _, o := range held {
		shard, ok := sqliteShardOf(o.table)
		if !ok || o.kind != "table" || r.Contains(shard) {
			continue
		}
		if _, err := p.write.ExecContext(ctx, "DROP TABLE IF EXISTS "+o.name); err != nil {
			return false, p.fail("strays: drop "+o.name, err)
		}
		p.forgetShards(cells.ShardRange{First: shard, Last: shard})
		s.dropped.Add(1)
		return true, nil
	}
	return false, nil
}

// stopStrays stops a sweep under way and waits for it (Close).
func (p *PartitionStore) stopStrays() {
	s := &p.strays
	s.mu.Lock()
	if !s.closed && s.stop != nil {
		close(s.stop)
	}
	s.closed = true
	s.mu.Unlock()
	s.done.Wait()
}
