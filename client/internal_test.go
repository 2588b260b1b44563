package client

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/wire"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-3", 0},
		{"2", 2 * time.Second},
		{" 7 ", 7 * time.Second},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"99999999999999999", (1 << 20) * time.Second},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, parseRetryAfter(tc.in, now), "parseRetryAfter(%q)", tc.in)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	c := &Client{cfg: Config{BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}}
	ceilings := map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 5: 100, 6: 100, 60: 100}
	for n, ceil := range ceilings {
		ceil *= time.Millisecond
		var top time.Duration
		for range 2000 {
			d := c.backoff(n, 0)
			if d < 0 || d >= ceil { // a plain check first: 14,000 draws
				require.Failf(t, "backoff out of range", "backoff(%d): got %s, want in [0, %s)", n, d, ceil)
			}
			top = max(top, d)
		}
		assert.GreaterOrEqual(t, top, ceil/2, "backoff(%d): most over 2000 draws, want values spread up to %s", n, ceil)
	}
	assert.Equal(t, 50*time.Millisecond, c.backoff(1, 50*time.Millisecond), "backoff with Retry-After 50ms")
	assert.Equal(t, 100*time.Millisecond, c.backoff(1, time.Hour), "backoff with Retry-After 1h: want BackoffMax")
	huge := &Client{cfg: Config{BackoffBase: time.Hour, BackoffMax: 1 << 62}}
	d := huge.backoff(80, 0)
	assert.True(t, d >= 0 && d < 1<<62, "backoff(80) with huge durations: got %s, want in [0, BackoffMax)", d)
}

func TestEndpointOrder(t *testing.T) {
	t.Parallel()
	e := &endpoints{urls: []string{"a", "b", "c"}}
	e.downUntil = make([]atomic.Int64, 3)
	now := time.Now()
	for call, want := range [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}} {
		assert.Equal(t, want, e.order(now), "call %d: order", call)
	}
	e.markDown(1, now)
	assert.Equal(t, []int{2, 0, 1}, e.order(now), "with b cooling down") // start 1
	assert.Equal(t, []int{2, 0, 1}, e.order(now.Add(EndpointCooldown+time.Millisecond)), "after the cool-down: plain rotation from c")
	e.markDown(0, now)
	e.markUp(1)
	assert.Equal(t, []int{1, 2, 0}, e.order(now), "with a cooling down and b up again") // start 0
}

func TestSentinelFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		code   string
		status int
		want   error
	}{
		{wire.CodeInvalidArgument, 400, ErrInvalidArgument},
		{wire.CodeNotFound, 404, ErrNotFound},
		{wire.CodeConflict, 409, ErrConflict},
		{wire.CodeTooLarge, 413, ErrTooLarge},
		{wire.CodeUnavailable, 503, ErrUnavailable},
		{wire.CodeIndeterminate, 504, ErrIndeterminate},
		{wire.CodeInternal, 500, ErrInternal},
		{wire.CodeMethod, 405, nil},
		{"", 400, ErrInvalidArgument},
		{"", 408, ErrUnavailable},
		{"", 429, ErrUnavailable},
		{"", 502, ErrInternal},
		{"", 418, nil},
		{"brand_new", 503, ErrUnavailable},
		{wire.CodeNotFound, 500, ErrNotFound}, // the code wins over the status
	}
	for _, tc := range cases {
		got := sentinelFor(tc.code, tc.status) // the sentinel itself (identity), or nil
		assert.True(t, got == tc.want, "sentinelFor(%q, %d): got %v, want %v", tc.code, tc.status, got, tc.want)
	}
}
