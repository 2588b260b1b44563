package transport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// HTTP client pooling, per Mux.
const (
	// maxIdleConnsPerPeer bounds the keep-alive connections kept open to one peer.
	maxIdleConnsPerPeer = 64
	// maxIdleConns bounds the keep-alive connections kept open to all peers.
	maxIdleConns = 1024
	// idleConnTimeout closes a keep-alive connection unused for this long. Servers on
	// RPCListener should use a longer http.Server.IdleTimeout (see # Caveats).
	idleConnTimeout = 60 * time.Second
)

// RPCListener returns the listener of this node's RPC connections (header kind RPC), for an
// http.Server to Serve. It registers RPC on the first call; until then RPC connections are
// closed on arrival. Later calls return the same listener while it is open, and a fresh one
// after it was closed (an http.Server's Shutdown closes it). After the Mux's Close it returns a
// closed listener: Accept returns ErrClosed. Accept blocks until a connection arrives or the
// listener or Mux is closed.
func (m *Mux) RPCListener() net.Listener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		l := newListener(m.advertise, nil)
		l.Close()
		return l
	}
	if m.rpc == nil {
		var l *listener
		l = newListener(m.advertise, func() {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.rpc == l {
				m.rpc = nil
			}
		})
		m.rpc = l
	}
	return m.rpc
}

// DialRPC connects to the Mux at addr (a peer's advertise address, "host:port") from the bind
// IP and writes the RPC header. network must be "tcp", "tcp4" or "tcp6". It blocks until
// connected, ctx is done or Config.DialTimeout passes. Its signature fits
// http.Transport.DialContext. The caller owns the connection. After Close it returns ErrClosed.
func (m *Mux) DialRPC(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("transport: dial %s: network %q not supported", addr, network)
	}
	return m.dial(ctx, addr, rpcHeader())
}

// HTTPClient returns a client sending plain HTTP/1.1 to peers through the Mux: the host of a
// request URL is the peer's advertise address ("http://127.0.0.3:7170/..."), and every
// connection is dialed with DialRPC. All clients of a Mux share one connection pool (keep-alive,
// up to 64 idle connections per peer, 60s idle timeout, no proxy, no HTTP/2); Close closes its
// idle connections. timeout bounds each request including reading the body (http.Client.Timeout;
// 0 means none, leaving only the request's context). Safe for concurrent use.
func (m *Mux) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: m.http, Timeout: timeout}
}

// newHTTPTransport returns a pooled HTTP/1.1 transport dialing through dial.
func newHTTPTransport(dial DialFunc) *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // peers are reached directly, whatever HTTP_PROXY says
		DialContext:           dial,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          maxIdleConns,
		MaxIdleConnsPerHost:   maxIdleConnsPerPeer,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: time.Second,
	}
}
