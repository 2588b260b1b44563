package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/schemaless-db/schemaless/security"
	"github.com/schemaless-db/schemaless/wire"
)

// connKey is the context key of a connection's *connInflight (ConnContext).
type connKey struct{}

// connInflight counts the requests in flight on one connection.
type connInflight struct{ n atomic.Int64 }

// ConnContext is an http.Server.ConnContext: it gives each connection the counter of its
// requests in flight that Config.MaxInflightPerConn bounds. Without it on the server, requests
// are not counted per connection.
func ConnContext(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, new(connInflight))
}

// limitKey names the principal whose requests in flight Config.MaxInflightPerPrincipal bounds:
// the authenticated principal ("principal:<name>", security.PrincipalFrom) when Config.Auth is
// on, else the client's IP address ("ip:<host of r.RemoteAddr>"; RemoteAddr itself when it has
// no port).
func limitKey(r *http.Request) string {
	if p := security.PrincipalFrom(r.Context()); p != nil {
		return "principal:" + p.Name
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return "ip:" + r.RemoteAddr
	}
	return "ip:" + host
}

// Reasons of schemaless_http_requests_refused_total.
const (
	refusedConnLimit      = "conn_limit"        // 429: Config.MaxInflightPerConn
	refusedPrincipalLimit = "principal_limit"   // 429: Config.MaxInflightPerPrincipal
	refusedBodyTimeout    = "body_read_timeout" // 408: Config.BodyReadTimeout
)

// limiter bounds the requests in flight per connection and per principal. Safe for concurrent
// use.
type limiter struct {
	perConn      int // <= 0: no bound
	perPrincipal int // <= 0: no bound

	mu       sync.Mutex
	inflight map[string]int // by limitKey; entries at 0 are deleted
}

func newLimiter(perConn, perPrincipal int) *limiter {
	return &limiter{perConn: perConn, perPrincipal: perPrincipal, inflight: map[string]int{}}
}

// exempt reports whether r is never refused: the health probes.
func exempt(r *http.Request) bool {
	return r.URL.Path == "/healthz" || r.URL.Path == "/readyz"
}

// admit counts r in flight on its connection and for its principal, or refuses it with a 429
// when either is at its limit (nothing counted then). release, called once r's handling ends,
// uncounts it.
func (s *Server) admit(r *http.Request) (release func(), he *httpError) {
	l := s.limits
	if exempt(r) || (l.perConn <= 0 && l.perPrincipal <= 0) {
		return func() {}, nil
	}
	var conn *connInflight
	if l.perConn > 0 {
		conn, _ = r.Context().Value(connKey{}).(*connInflight)
	}
	if conn != nil {
		if conn.n.Add(1) > int64(l.perConn) {
			conn.n.Add(-1)
			s.metrics.refuse(refusedConnLimit)
			return nil, tooMany("this connection already has %d requests in flight, the most allowed (--max-inflight-per-conn)", l.perConn)
		}
	}
	key := ""
	if l.perPrincipal > 0 {
		key = limitKey(r)
		l.mu.Lock()
		if l.inflight[key] >= l.perPrincipal {
			l.mu.Unlock()
			if conn != nil {
				conn.n.Add(-1)
			}
			s.metrics.refuse(refusedPrincipalLimit)
			return nil, tooMany("this client already has %d requests in flight, the most allowed (--max-inflight-per-principal)", l.perPrincipal)
		}
		l.inflight[key]++
		l.mu.Unlock()
	}
	return func() {
		if conn != nil {
			conn.n.Add(-1)
		}
		if l.perPrincipal > 0 {
			l.mu.Lock()
			if l.inflight[key]--; l.inflight[key] <= 0 {
				delete(l.inflight, key)
			}
			l.mu.Unlock()
		}
	}, nil
}

// tooMany is a 429 too_many_requests (writeError adds Retry-After).
func tooMany(format string, args ...any) *httpError {
	return &httpError{status: http.StatusTooManyRequests, code: wire.CodeTooManyRequests, msg: fmt.Sprintf(format, args...)}
}
