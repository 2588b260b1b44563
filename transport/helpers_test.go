package transport

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
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
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
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

// waitAccept waits up to d for an Accept started by acceptAsync.
func waitAccept(t testing.TB, ch <-chan acceptResult, d time.Duration) acceptResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		t.Fatalf("Accept did not return within %v", d)
		return acceptResult{}
	}
}

// expectClosedByPeer reads from c until the peer closes it, failing if that takes longer than
// within. It returns how long it took.
func expectClosedByPeer(t testing.TB, c net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(within)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	switch {
	case err == nil:
		t.Fatalf("read %q from a connection that should be closed", buf[:n])
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatalf("connection still open after %v: got a read timeout, want EOF or reset", within)
	case !errors.Is(err, io.EOF):
		t.Logf("read error (closed by peer): %v", err)
	}
	return time.Since(start)
}
