package client

import (
	"net/http"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/schemaless-db/schemaless/api/wire"
)

func TestParseRetryAfter(t *testing.T) {
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
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q): got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := &Client{cfg: Config{BackoffBase: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond}}
	ceilings := map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 5: 100, 6: 100, 60: 100}
	for n, ceil := range ceilings {
		ceil *= time.Millisecond
		var top time.Duration
		for range 2000 {
			d := c.backoff(n, 0)
			if d < 0 || d >= ceil {
				t.Fatalf("backoff(%d): got %s, want in [0, %s)", n, d, ceil)
			}
			top = max(top, d)
		}
		if top < ceil/2 {
			t.Errorf("backoff(%d): got at most %s over 2000 draws, want values spread up to %s", n, top, ceil)
		}
	}
	if d := c.backoff(1, 50*time.Millisecond); d != 50*time.Millisecond {
		t.Errorf("backoff with Retry-After 50ms: got %s, want 50ms", d)
	}
	if d := c.backoff(1, time.Hour); d != 100*time.Millisecond {
		t.Errorf("backoff with Retry-After 1h: got %s, want BackoffMax 100ms", d)
	}
	huge := &Client{cfg: Config{BackoffBase: time.Hour, BackoffMax: 1 << 62}}
	if d := huge.backoff(80, 0); d < 0 || d >= 1<<62 {
		t.Errorf("backoff(80) with huge durations: got %s, want in [0, BackoffMax)", d)
	}
}

func TestEndpointOrder(t *testing.T) {
	e := &endpoints{urls: []string{"a", "b", "c"}}
	e.downUntil = make([]atomic.Int64, 3)
	now := time.Now()
	for call, want := range [][]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}} {
		if got := e.order(now); !reflect.DeepEqual(got, want) {
			t.Errorf("call %d: got order %v, want %v", call, got, want)
		}
	}
	e.markDown(1, now)
	if got, want := e.order(now), []int{2, 0, 1}; !reflect.DeepEqual(got, want) { // start 1
		t.Errorf("with b cooling down: got %v, want %v", got, want)
	}
	if got, want := e.order(now.Add(EndpointCooldown+time.Millisecond)), []int{2, 0, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the cool-down: got %v, want %v (plain rotation from c)", got, want)
	}
	e.markDown(0, now)
	e.markUp(1)
	if got, want := e.order(now), []int{1, 2, 0}; !reflect.DeepEqual(got, want) { // start 0
		t.Errorf("with a cooling down and b up again: got %v, want %v", got, want)
	}
}

func TestSentinelFor(t *testing.T) {
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
		if got := sentinelFor(tc.code, tc.status); got != tc.want {
			t.Errorf("sentinelFor(%q, %d): got %v, want %v", tc.code, tc.status, got, tc.want)
		}
	}
}
