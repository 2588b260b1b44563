package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Errors returned by Mux, RaftLayer, the RPC listener and ValidateName.
var (
	// ErrClosed: the Mux, the RaftLayer or the listener was closed. It wraps net.ErrClosed, so
	// errors.Is(err, net.ErrClosed) is also true (http.Server and raft treat it as shutdown).
	ErrClosed = fmt.Errorf("transport: closed: %w", net.ErrClosed)
	// ErrAlreadyRegistered: a RaftLayer for that partition name is open on this Mux.
	ErrAlreadyRegistered = errors.New("transport: partition already registered")
	// ErrInvalidName: the partition name cannot be carried in a header (see ValidateName).
	ErrInvalidName = errors.New("transport: invalid partition name")
)

// errTLS marks a failed TLS handshake of an accepted connection.
var errTLS = errors.New("transport: TLS handshake")

// Mux is one node's TCP listener, shared by the raft traffic of every partition the node hosts
// and by node-to-node RPC. It routes each accepted connection by its header to the RaftLayer
// registered for the named partition or to the RPC listener, and dials peers from the node's
// bind IP. All methods are safe for concurrent use.
type Mux struct {
	cfg       Config
	log       *slog.Logger
	ln        net.Listener
	advertise net.Addr
	dialFn    DialFunc
	http      *http.Transport

	mu      sync.Mutex
	closed  bool
	raft    map[string]*listener // registered raft layers by partition name
	rpc     *listener            // nil until RPCListener is called
	pending map[net.Conn]struct{}
	// registered is closed, and replaced, whenever a raft layer registers (awaitRaft).
	registered chan struct{}

	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// New listens on cfg.BindAddr and starts accepting connections in a goroutine of its own. It
// fills cfg's defaults (EnsureDefaults), then returns Validate's error or the listen error.
// The caller must Close the Mux.
func New(cfg Config) (*Mux, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", cfg.BindAddr, err)
	}
	bound := ln.Addr().(*net.TCPAddr)
	advertise := cfg.AdvertiseAddr
	if advertise == "" {
		advertise = bound.String()
	}
	d := &net.Dialer{KeepAlive: 15 * time.Second}
	if !bound.IP.IsUnspecified() {
		// The source-address rule: see the package documentation.
		d.LocalAddr = &net.TCPAddr{IP: bound.IP, Zone: bound.Zone}
	}
	dialFn := DialFunc(d.DialContext)
	if cfg.WrapDial != nil {
		dialFn = cfg.WrapDial(dialFn)
	}
	m := &Mux{
		cfg:       cfg,
		log:       cfg.Logger.With("component", "transport", "addr", advertise),
		ln:        ln,
		advertise: addr(advertise),
		dialFn:    dialFn,
		raft:      make(map[string]*listener),
		pending:   make(map[net.Conn]struct{}),
		done:      make(chan struct{}),

		registered: make(chan struct{}),
	}
	m.http = newHTTPTransport(m.DialRPC)
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr returns the advertise address: what peers dial, and the raft ServerAddress of every
// partition replica on this node.
func (m *Mux) Addr() net.Addr { return m.advertise }

// ListenAddr returns the address actually bound (BindAddr with port 0 resolved).
func (m *Mux) ListenAddr() net.Addr { return m.ln.Addr() }

// Close stops accepting, closes every RaftLayer and RPC listener handed out (their Accept
// returns ErrClosed), drops connections still in their handshake or waiting to be accepted, and
// closes the idle connections of the HTTP client. Connections already accepted or dialed belong
// to their owners and stay open. Close waits for the Mux's goroutines to end; it is idempotent
// and returns the listener's close error of the first call.
func (m *Mux) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		close(m.done)
		ls := make([]*listener, 0, len(m.raft)+1)
		for _, l := range m.raft {
			ls = append(ls, l)
		}
		if m.rpc != nil {
			ls = append(ls, m.rpc)
		}
		pend := make([]net.Conn, 0, len(m.pending))
		for c := range m.pending {
			pend = append(pend, c)
		}
		m.mu.Unlock()

		m.closeErr = m.ln.Close()
		for _, l := range ls {
			l.Close()
		}
		for _, c := range pend {
			c.Close()
		}
		m.wg.Wait()
		m.http.CloseIdleConnections()
	})
	return m.closeErr
}

func (m *Mux) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// acceptLoop accepts until the listener is closed, starting one handshake goroutine per
// connection. Accept errors other than closing (for example EMFILE) are retried with backoff.
func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	var delay time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			m.log.Warn("transport: accept failed; retrying", "err", err, "delay", delay)
			select {
			case <-m.done:
				return
			case <-time.After(delay):
			}
			continue
		}
		delay = 0
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			conn.Close()
			return
		}
		m.pending[conn] = struct{}{}
		m.wg.Add(1)
		m.mu.Unlock()
		go m.handshake(conn)
	}
}

// handshake reads conn's header within HandshakeTimeout and hands conn to its consumer, or
// closes it.
func (m *Mux) handshake(conn net.Conn) {
	defer m.wg.Done()
	remote := conn.RemoteAddr().String()
	raw := conn
	_ = conn.SetDeadline(time.Now().Add(m.cfg.HandshakeTimeout))
	var err error
	if m.cfg.ServerTLS != nil {
		tc := tls.Server(conn, m.cfg.ServerTLS)
		if err = tc.Handshake(); err != nil {
			err = fmt.Errorf("%w: %w", errTLS, err)
		}
		conn = tc
	}
	var kind byte
	var name string
	if err == nil {
		kind, name, err = readHeader(conn)
	}
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}

	m.mu.Lock()
	delete(m.pending, raw)
	closed := m.closed
	var l *listener
	if err == nil && !closed {
		if kind == kindRaft {
			l = m.raft[name]
		} else {
			l = m.rpc
		}
	}
	m.mu.Unlock()
	if err == nil && !closed && kind == kindRaft && l == nil {
		l = m.awaitRaft(name)
	}

	switch {
	case closed:
		conn.Close()
	case errors.Is(err, errTLS):
		// A peer without a certificate the CA signed, a client certificate, plaintext.
		m.log.Warn("transport: refused connection: TLS handshake failed", "remote", remote, "err", err)
		conn.Close()
	case errors.Is(err, errBadHeader):
		m.log.Warn("transport: rejected connection with a bad header", "remote", remote, "err", err)
		conn.Close()
	case err != nil:
		// Silent or half-sent header: port probes, peers dying mid-dial, Close.
		level := slog.LevelDebug
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
			level = slog.LevelWarn
		}
		m.log.Log(context.Background(), level, "transport: connection header not read", "remote", remote, "err", err)
		conn.Close()
	case l == nil:
		// Not registered (yet, or any more): the peer's raft retries.
		m.log.Debug("transport: rejected connection for an unregistered consumer", "remote", remote, "kind", string(kind), "partition", name)
		conn.Close()
	default:
		l.deliver(conn)
	}
}

// awaitRaft waits up to Config.UnregisteredWait for a raft layer named name to register and
// returns its listener, or nil when none did in time or the Mux closed.
func (m *Mux) awaitRaft(name string) *listener {
	if m.cfg.UnregisteredWait <= 0 {
		return nil
	}
	timer := time.NewTimer(m.cfg.UnregisteredWait)
	defer timer.Stop()
	for {
		m.mu.Lock()
		l, registered, closed := m.raft[name], m.registered, m.closed
		m.mu.Unlock()
		if l != nil || closed {
			return l
		}
		select {
		case <-registered:
		case <-timer.C:
			return nil
		case <-m.done:
			return nil
		}
	}
}

// dial connects to addr through the (possibly wrapped) dialer within DialTimeout and ctx, and
// writes hdr. The caller owns the returned connection.
func (m *Mux) dial(ctx context.Context, addr string, hdr []byte) (net.Conn, error) {
	if m.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.DialTimeout)
	defer cancel()
	conn, err := m.dialFn(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	deadline, _ := ctx.Deadline()
	if m.cfg.ClientTLS != nil {
		cfg := m.cfg.ClientTLS.Clone()
		host, _, _ := net.SplitHostPort(addr)
		cfg.ServerName = host
		if verify := cfg.VerifyConnection; verify != nil {
			// TLS sends no SNI for an IP address, and the client's ConnectionState then has
			// no ServerName: hand the dialed host to the check either way.
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				cs.ServerName = host
				return verify(cs)
			}
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("transport: TLS handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	if err := conn.SetWriteDeadline(deadline); err != nil {
		conn.Close()
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	if _, err := conn.Write(hdr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("transport: write header to %s: %w", addr, err)
	}
	if err := conn.SetWriteDeadline(time.Time{}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("transport: dial %s: %w", addr, err)
	}
	return conn, nil
}

// listener is the net.Listener side of one consumer (a raft layer or the RPC listener). The
// handshake goroutines hand it connections over an unbuffered channel, so a connection is
// either taken by Accept or still owned (and closed) by its handshake goroutine.
type listener struct {
	addr    net.Addr
	conns   chan net.Conn
	closed  chan struct{}
	once    sync.Once
	onClose func() // unregisters the listener; called once, on Close
}

func newListener(a net.Addr, onClose func()) *listener {
	return &listener{addr: a, conns: make(chan net.Conn), closed: make(chan struct{}), onClose: onClose}
}

// Accept blocks until a connection for this consumer arrives or the listener (or its Mux) is
// closed, then returns the connection or ErrClosed.
func (l *listener) Accept() (net.Conn, error) {
	select {
	case <-l.closed:
		return nil, ErrClosed
	default:
	}
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, ErrClosed
	}
}

// Close unregisters the listener and unblocks Accept. Idempotent; always nil.
func (l *listener) Close() error {
	l.once.Do(func() {
		close(l.closed)
		if l.onClose != nil {
			l.onClose()
		}
	})
	return nil
}

// Addr returns the Mux's advertise address.
func (l *listener) Addr() net.Addr { return l.addr }

// deliver blocks until Accept takes conn, or closes conn if the listener is closed first.
func (l *listener) deliver(conn net.Conn) {
	select {
	case l.conns <- conn:
	case <-l.closed:
		conn.Close()
	}
}

// addr is a net.Addr for an advertise address, which may be a host name.
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }
