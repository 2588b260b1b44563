package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rate tests run in a synctest bubble: time there is a fake clock that moves only when every
// goroutine of the run is blocked (on a timer, a channel or a wait group), straight to the next
// timer. A request that "takes 20 ms" (time.Sleep) takes exactly 20 ms of that clock however
// loaded the machine is, so the counts below are exact, derived from the schedule alone.

// TestRunLoadClosedOps checks that a closed-loop run with --ops ends after exactly that many
// measured requests, failed ones included, when --duration would last an hour.
func TestRunLoadClosedOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		errFail := errors.New("every seventh fails")
		op := func(ctx context.Context, _ *rand.Rand) (int, error) {
			if calls.Add(1)%7 == 0 {
				return 2, errFail
			}
			time.Sleep(100 * time.Microsecond)
			return 2, nil
		}
		r := runLoad(context.Background(), 3, 0, Config{Ops: 137, Duration: time.Hour}, op)
		assert.Equal(t, int64(137), r.Ops+r.Errors, "ops + errors: every measured request, no warm-up")
		assert.Equal(t, int64(137), calls.Load(), "calls: no more requests than --ops")
		assert.Equal(t, 2*r.Ops, r.Cells, "cells: 2 per op")
		assert.Equal(t, int64(137/7), r.Errors, "errors: every seventh call")
		assert.Equal(t, errFail.Error(), r.FirstError)
		assert.Greater(t, r.Seconds, 0.0)
		assert.Less(t, r.Seconds, 60.0, "seconds: ended by --ops, not --duration")
	})
}

// TestRunLoadOpenLoopLate runs an open loop at 200 requests/s (one due every 5 ms) for 0.5 s with
// one client whose requests take 20 ms each: request k is sent when the client is done with
// k-1, at 20k ms, so it is late for every k > 0, and its latency, counted from its due time
// 5k ms, is 20(k+1) - 5k = 15k + 20 ms (what a closed loop, at 20 ms, would hide).
func TestRunLoadOpenLoopLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		op := func(ctx context.Context, _ *rand.Rand) (int, error) {
			time.Sleep(20 * time.Millisecond)
			return 1, nil
		}
		r := runLoad(context.Background(), 1, 200, Config{Duration: 500 * time.Millisecond}, op)
		t.Logf("%+v", r)
		// 100 requests are due before 500 ms. Request 25 is the last sent: the scheduler takes
		// it up at 480 ms, before the end, and hands it over when the client is free, at 500
		// ms; at request 26 the run has ended, and requests 26..99 are never sent.
		assert.Equal(t, int64(26), r.Ops, "ops: requests 0..25, one 20 ms request at a time")
		assert.Equal(t, int64(99), r.Late, "late: every request due after the first found the client busy")
		// Request 25: due at 125 ms, answered at 520 ms (HDR histograms keep 3 digits).
		assert.InEpsilon(t, 395_000, r.Max, 1e-3, "max latency in µs, counted from the due time")
		assert.Equal(t, 200, r.Rate)
		assert.Equal(t, 1, r.Clients)
		assert.Equal(t, 0.5, r.Seconds, "seconds: --duration")
	})
}

// TestRunLoadOpenLoopRate runs an open loop at 200 requests/s for 1 s after a 200 ms warm-up
// with 8 clients whose requests take 1 ms: a client is always free when a request is due, so
// the run sends exactly the 40 requests due in the warm-up and the 200 due in the measured
// second, none late, each answered 1 ms after its due time.
func TestRunLoadOpenLoopRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		op := func(ctx context.Context, _ *rand.Rand) (int, error) {
			calls.Add(1)
			time.Sleep(time.Millisecond)
			return 3, nil
		}
		r := runLoad(context.Background(), 8, 200, Config{Warmup: 200 * time.Millisecond, Duration: time.Second}, op)
		t.Logf("%+v", r)
		assert.Equal(t, int64(240), calls.Load(), "calls: 40 of the warm-up, then the 200 measured")
		assert.Equal(t, int64(200), r.Ops, "ops: the requests due in the measured second")
		assert.Equal(t, int64(600), r.Cells, "cells: 3 per op")
		assert.Equal(t, 200.0, r.OpsPerSec)
		assert.Equal(t, 1.0, r.Seconds)
		assert.Equal(t, int64(0), r.Late, "late: a client is free at every due time")
		assert.InEpsilon(t, 1000, r.P50, 1e-3, "p50 in µs: the 1 ms a request takes")
		assert.InEpsilon(t, 1000, r.Max, 1e-3, "max in µs")
	})
}

// TestRunLoadOpenLoopOps runs an open loop with --ops: the run ends once the first 30 requests
// due after the warm-up are answered, though --duration is an hour, and its time runs from the
// first measured request's due time to the last answer.
func TestRunLoadOpenLoopOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		op := func(ctx context.Context, _ *rand.Rand) (int, error) {
			calls.Add(1)
			time.Sleep(2 * time.Millisecond)
			return 1, nil
		}
		r := runLoad(context.Background(), 4, 100, Config{Ops: 30, Warmup: 50 * time.Millisecond, Duration: time.Hour}, op)
		t.Logf("%+v", r)
		assert.Equal(t, int64(35), calls.Load(), "calls: 5 of the warm-up (0..40 ms), then 30")
		assert.Equal(t, int64(30), r.Ops)
		// Measured requests are due at 50, 60, ..., 340 ms; the last is answered at 342 ms.
		assert.InDelta(t, 0.292, r.Seconds, 1e-9, "seconds: first measured due time to last answer")
	})
}

// TestRunLoadCanceled checks that a run whose context ends stops sending and reports the
// measured time up to then.
func TestRunLoadCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The deadline falls between two due times: one at the same instant would race it.
		ctx, cancel := context.WithTimeout(context.Background(), 295*time.Millisecond)
		defer cancel()
		op := func(ctx context.Context, _ *rand.Rand) (int, error) { return 1, nil }
		r := runLoad(ctx, 2, 100, Config{Warmup: 100 * time.Millisecond, Duration: time.Hour}, op)
		require.NotNil(t, ctx.Err())
		assert.InDelta(t, 0.195, r.Seconds, 1e-9, "seconds: from the warm-up's end to the cancel")
		// Due at 100, 110, ..., 290 ms: 20 measured requests (the one due at 300 ms finds ctx done).
		assert.Equal(t, int64(20), r.Ops)
	})
}
