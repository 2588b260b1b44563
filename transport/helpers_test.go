package transport

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tWriter sends log lines to t.Log until the test's cleanup, then drops them (goroutines of a
// stopping raft may still log).
type tWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// testLogger returns a debug-level logger writing through t.Log.
func testLogger(t testing.TB) *slog.Logger {
	w := &tWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newMux starts a Mux on ip with a free port, closed at the end of the test. mod, if not nil,
// edits the config first.
func newMux(t testing.TB, ip string, mod func(*Config)) *Mux {
	t.Helper()
	cfg := DefaultConfig()
	cfg.BindAddr = net.JoinHostPort(ip, "0")
	cfg.Logger = testLogger(t).With("node", ip)
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	require.NoError(t, err, "New(%+v)", cfg)
	t.Cleanup(func() { m.Close() })
	return m
}

// acceptResult is one Accept's outcome.
type acceptResult struct {
	conn net.Conn
	err  error
}

// acceptAsync runs one Accept on l in a goroutine and returns its outcome channel.
func acceptAsync(l net.Listener) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := l.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

// received returns a condition for require.Eventually that is true once ch has delivered a
// value, which it stores in *v.
func received[T any](ch <-chan T, v *T) func() bool {
	return func() bool {
		select {
		case *v = <-ch:
			return true
		default:
			return false
		}
	}
}

// accepted returns the outcome of an Accept started by acceptAsync, failing the test if Accept
// does not return within d.
func accepted(t testing.TB, ch <-chan acceptResult, d time.Duration) acceptResult {
	t.Helper()
	var r acceptResult
	require.Eventually(t, received(ch, &r), d, 5*time.Millisecond, "Accept did not return within %v", d)
	return r
}

// expectClosedByPeer reads from c until the peer closes it, failing if that takes longer than
// within. It returns how long it took.
func expectClosedByPeer(t testing.TB, c net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(start.Add(within)))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	require.Error(t, err, "read %q from a connection that should be closed", buf[:n])
	require.NotErrorIs(t, err, os.ErrDeadlineExceeded, "connection still open after %v: want EOF or reset", within)
	if !errors.Is(err, io.EOF) {
		t.Logf("read error (closed by peer): %v", err)
	}
	return time.Since(start)
}

// blockedIn returns how many goroutines are blocked (in a select, a channel operation, I/O...,
// not running) with every one of frames in their stack trace. Tests that count goroutines do not
// run in parallel with others.
func blockedIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		// The first line is "goroutine 7 [select]:" or "goroutine 7 [IO wait, 2 minutes]:".
		header, stack, _ := strings.Cut(g, "\n")
		_, state, _ := strings.Cut(header, "[")
		state, _, _ = strings.Cut(state, "]")
		state, _, _ = strings.Cut(state, ",")
		if state == "running" || state == "runnable" || state == "syscall" {
			continue
		}
		all := true
		for _, f := range frames {
			all = all && strings.Contains(stack, f)
		}
		if all {
			count++
		}
	}
	return count
}
