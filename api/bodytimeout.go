package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/wire"
)

// errBodyTimeout wraps the read error of a request body not received within
// Config.BodyReadTimeout.
var errBodyTimeout = errors.New("api: request body not received in time")

// restorePrefix is the path of restores, whose body is bounded per read (see
// Config.BodyReadTimeout).
const restorePrefix = "/v1/admin/restore/"

// bodyKey is the context key of a request's *deadlineBody.
type bodyKey struct{}

// guardBody bounds the reception of r's body by Config.BodyReadTimeout: it sets a read deadline
// on the connection (HTTP/1.1) or the stream (HTTP/2) through http.ResponseController, clears it
// once the body has been read to its end, and returns w and r wrapped so that a handler whose
// body read ran out of time answers 408 request_timeout with "Connection: close", whatever it
// wrote. The deadline stays set when the handler returns without reading the whole body, so
// net/http's discarding of the rest after the handler is bounded too (and the connection is
// closed when it runs out). done must be called when the request's handling ends; it writes the
// 408 when the handler wrote nothing. Requests without a body, and writers without deadlines
// (httptest.ResponseRecorder), are returned as they are.
func (s *Server) guardBody(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	timeout := s.cfg.BodyReadTimeout
	if timeout <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return w, r, func() {}
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return w, r, func() {}
	}
	b := &deadlineBody{body: r.Body, rc: rc, timeout: timeout, perRead: strings.HasPrefix(r.URL.Path, restorePrefix)}
	r2 := r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
	r2.Body = b
	tw := &bodyTimeoutWriter{ResponseWriter: w, body: b}
	done := func() {
		if b.timedOut.Load() {
			s.metrics.refuse(refusedBodyTimeout)
			if !tw.wrote {
				tw.WriteHeader(http.StatusRequestTimeout)
			}
		}
	}
	return tw, r2, done
}

// bodyTimedOut reports whether r's body ran out of Config.BodyReadTimeout (for the metrics of a
// request answered 408 in place of what its handler wrote).
func bodyTimedOut(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*deadlineBody)
	return ok && b.timedOut.Load()
}

// deadlineBody is a request body read under a read deadline. Its reads run on the handler's
// goroutine; the mutex orders them with Close, which net/http may call from another.
type deadlineBody struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	timeout  time.Duration
	perRead  bool // each read bringing data moves the deadline (restores)
	timedOut atomic.Bool

	mu      sync.Mutex
	cleared bool
}

// Read reads the body. At its end the read deadline is cleared (so that the rest of the
// request, a long poll or a long response, is not cut); when the deadline passed first the
// error wraps errBodyTimeout.
func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		b.clear()
	case err != nil && isTimeout(err):
		b.timedOut.Store(true)
		return n, fmt.Errorf("%w (%s): %w", errBodyTimeout, b.timeout, err)
	case n > 0 && b.perRead:
		b.mu.Lock()
		if !b.cleared {
			_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout))
		}
		b.mu.Unlock()
	}
	return n, err
}

// Close closes the body.
func (b *deadlineBody) Close() error { return b.body.Close() }

// clear removes the read deadline, once.
func (b *deadlineBody) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.cleared {
		b.cleared = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// bodyTimeoutWriter answers 408 in place of the handler's answer when the request's body ran
// out of time before the handler began its answer. It is used by one handler goroutine.
type bodyTimeoutWriter struct {
	http.ResponseWriter
	body     *deadlineBody
	wrote    bool // the status line is decided
	replaced bool // the answer is the 408: what the handler writes is dropped
}

// WriteHeader passes status on, or writes the 408 when the body timed out.
func (w *bodyTimeoutWriter) WriteHeader(status int) {
	if w.replaced {
		return
	}
	if w.wrote || status < 200 {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.wrote = true
	if !w.body.timedOut.Load() {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.replaced = true
	h := w.ResponseWriter.Header()
	for _, k := range []string{"Retry-After", "Content-Length", "Content-Encoding", "Content-Disposition"} {
		h.Del(k)
	}
	h.Set("Connection", "close")
	writeError(w.ResponseWriter, &httpError{status: http.StatusRequestTimeout, code: wire.CodeRequestTimeout, field: "body",
		msg: fmt.Sprintf("body: not received within %s (--body-read-timeout); the connection is closed", w.body.timeout)})
}

// Write writes b, after an implicit 200; dropped (reported written) after a 408.
func (w *bodyTimeoutWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer, after an implicit 200.
func (w *bodyTimeoutWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the underlying ResponseWriter (http.ResponseController).
func (w *bodyTimeoutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
