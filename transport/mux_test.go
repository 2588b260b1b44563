package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	valid := func() Config {
		c := DefaultConfig()
		c.BindAddr = "127.0.0.2:7170"
		return c
	}
	tests := []struct {
		desc string
		edit func(*Config)
		want []string // substrings of the error; none means valid
	}{
		{"default with bind", func(*Config) {}, nil},
		{"port 0", func(c *Config) { c.BindAddr = "127.0.0.2:0" }, nil},
		{"host name", func(c *Config) { c.BindAddr = "localhost:0" }, nil},
		{"unspecified with advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7170"; c.AdvertiseAddr = "node1:7170" }, nil},
		{"no bind", func(c *Config) { c.BindAddr = "" }, []string{"BindAddr is required"}},
		{"bind without port", func(c *Config) { c.BindAddr = "127.0.0.2" }, []string{"BindAddr"}},
		{"bad port", func(c *Config) { c.BindAddr = "127.0.0.2:http" }, []string{"bad port"}},
		{"unspecified without advertise", func(c *Config) { c.BindAddr = "0.0.0.0:7170" }, []string{"AdvertiseAddr is required"}},
		{"empty host without advertise", func(c *Config) { c.BindAddr = ":7170" }, []string{"AdvertiseAddr is required"}},
		{"advertise port 0", func(c *Config) { c.AdvertiseAddr = "node1:0" }, []string{"AdvertiseAddr"}},
		{"advertise unspecified", func(c *Config) { c.AdvertiseAddr = "0.0.0.0:7170" }, []string{"dialable"}},
		{"every violation", func(c *Config) {
			c.BindAddr = ""
			c.DialTimeout = -1
			c.HandshakeTimeout = 0
			c.Logger = nil
		}, []string{"BindAddr", "DialTimeout", "HandshakeTimeout", "Logger"}},
	}
	for _, tt := range tests {
		c := valid()
		tt.edit(&c)
		err := c.Validate()
		if len(tt.want) == 0 {
			assert.NoError(t, err, "%s: Validate()", tt.desc)
			continue
		}
		if !assert.Error(t, err, "%s: Validate(): want an error mentioning %q", tt.desc, tt.want) {
			continue
		}
		for _, w := range tt.want {
			assert.ErrorContains(t, err, w, "%s: Validate()", tt.desc)
		}
		assert.True(t, strings.HasPrefix(err.Error(), "transport: "), "%s: got error %q, want the prefix \"transport: \"", tt.desc, err)
	}

	var zero Config
	zero.BindAddr = "127.0.0.2:0"
	zero.EnsureDefaults()
	assert.NoError(t, zero.Validate(), "EnsureDefaults then Validate")
}

func TestAddresses(t *testing.T) {
	t.Parallel()
	m := newMux(t, "127.0.0.2", nil)
	la := m.ListenAddr().(*net.TCPAddr)
	require.True(t, la.IP.Equal(net.ParseIP("127.0.0.2")) && la.Port != 0, "ListenAddr: got %v, want 127.0.0.2 with a real port", la)
	assert.Equal(t, la.String(), m.Addr().String(), "Addr with no AdvertiseAddr: want the bound address")
	l, err := m.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	assert.Equal(t, la.String(), l.Addr().String(), "RaftLayer.Addr")
	assert.Equal(t, la.String(), m.RPCListener().Addr().String(), "RPCListener.Addr")

	adv := newMux(t, "127.0.0.3", func(c *Config) { c.AdvertiseAddr = "node1.example:7170" })
	l2, err := adv.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	assert.Equal(t, "node1.example:7170", l2.Addr().String(), "RaftLayer.Addr with AdvertiseAddr")
}

// TestHeaderRouting dials two partitions of one mux, interleaved, and checks that each layer
// accepts only the connections naming it.
func TestHeaderRouting(t *testing.T) {
	t.Parallel()
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	names := []string{"trips/1", "trips/2"}
	accepting := map[string]*RaftLayer{}
	dialing := map[string]*RaftLayer{}
	for _, n := range names {
		var err error
		accepting[n], err = a.RaftLayer(n)
		require.NoError(t, err, "RaftLayer(%s) on the accepting mux", n)
		dialing[n], err = b.RaftLayer(n)
		require.NoError(t, err, "RaftLayer(%s) on the dialing mux", n)
	}

	const perName = 5
	errc := make(chan error, 2*perName)
	for i := 0; i < perName; i++ {
		for _, n := range names {
			go func() {
				c, err := dialing[n].Dial(raft.ServerAddress(a.Addr().String()), 2*time.Second)
				if err != nil {
					errc <- err
					return
				}
				// The first bytes after the header are the consumer's.
				_, err = fmt.Fprintf(c, "%-16s", n)
				errc <- err
				t.Cleanup(func() { c.Close() })
			}()
		}
	}
	for i := 0; i < 2*perName; i++ {
		require.NoError(t, <-errc, "dial and write")
	}
	for _, n := range names {
		for i := 0; i < perName; i++ {
			r := accepted(t, acceptAsync(accepting[n]), 5*time.Second)
			require.NoError(t, r.err, "%s: Accept", n)
			buf := make([]byte, 16)
			_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadFull(r.conn, buf)
			require.NoError(t, err, "%s: read", n)
			assert.Equal(t, n, strings.TrimSpace(string(buf)), "layer %s: partition named by an accepted connection", n)
			r.conn.Close()
		}
	}
	// Nothing else is waiting on either layer: for 100 ms no Accept returns.
	for _, n := range names {
		ch := acceptAsync(accepting[n])
		// The condition only looks (ch holds one result): assert.Never may leave a last check
		// running after it returns, and a check that took the result would hide it from the
		// Accept-after-Close check below.
		if !assert.Never(t, func() bool { return len(ch) > 0 }, 100*time.Millisecond, 10*time.Millisecond, "layer %s: got an extra connection, want none", n) {
			t.Logf("layer %s: the extra Accept returned error %v", n, (<-ch).err)
			continue
		}
		accepting[n].Close()
		assert.ErrorIs(t, accepted(t, ch, 5*time.Second).err, ErrClosed, "Accept after Close")
	}
}

// TestUnregisteredPartitionClosed checks that a connection for a partition the node does not
// (yet) host is closed, and that it is accepted once the partition registers.
func TestUnregisteredPartitionClosed(t *testing.T) {
	t.Parallel()
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	d, err := b.RaftLayer("ghost/1")
	require.NoError(t, err, "RaftLayer")
	c, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c.Close()
	expectClosedByPeer(t, c, 5*time.Second)

	// The RPC listener is not registered either until RPCListener is called.
	rc, err := b.DialRPC(context.Background(), "tcp", a.Addr().String())
	require.NoError(t, err, "DialRPC")
	defer rc.Close()
	expectClosedByPeer(t, rc, 5*time.Second)

	// With an RPC consumer accepting, a raft connection for an unknown partition still goes
	// nowhere.
	rpc := a.RPCListener()
	rpcAccept := acceptAsync(rpc)
	c1, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c1.Close()
	expectClosedByPeer(t, c1, 5*time.Second)
	rpc.Close()
	if r := accepted(t, rpcAccept, 5*time.Second); !assert.Error(t, r.err, "RPC listener accepted a raft connection for an unknown partition, want it closed") {
		r.conn.Close()
	}

	l, err := a.RaftLayer("ghost/1")
	require.NoError(t, err, "RaftLayer after the dials")
	ch := acceptAsync(l)
	c2, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c2.Close()
	r := accepted(t, ch, 5*time.Second)
	require.NoError(t, r.err, "Accept after registering: want a connection")
	r.conn.Close()
}

// TestBadHeaderClosed writes headers that are not ours, or nothing, and checks the mux closes
// the connection: at once for a bad header, after HandshakeTimeout for a silent peer.
//
// Not parallel: it measures how long the mux takes to close a connection.
func TestBadHeaderClosed(t *testing.T) {
	const handshake = time.Second
	a := newMux(t, "127.0.0.2", func(c *Config) { c.HandshakeTimeout = handshake })
	_, err := a.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	a.RPCListener()
	tests := []struct {
		desc   string
		in     []byte
		silent bool // the header is incomplete: closed only by the handshake timeout
	}{
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false},
		{"wrong magic", []byte{'s', kindRaft, 7, 't', 'r', 'i', 'p', 's', '/', '1'}, false},
		{"unknown kind", []byte{headerMagic, 'Z'}, false},
		{"empty name", []byte{headerMagic, kindRaft, 0}, false},
		{"bad name", []byte{headerMagic, kindRaft, 7, 't', 'r', 'i', 'p', 's', ' ', '1'}, false},
		{"nothing", nil, true},
		{"magic only", []byte{headerMagic}, true},
		{"truncated name", []byte{headerMagic, kindRaft, 7, 't', 'r', 'i'}, true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c, err := net.Dial("tcp", a.Addr().String())
			require.NoError(t, err, "dial the mux")
			defer c.Close()
			_, err = c.Write(tt.in)
			require.NoError(t, err, "write the header")
			took := expectClosedByPeer(t, c, handshake+3*time.Second)
			if tt.silent {
				assert.GreaterOrEqual(t, took, handshake/2, "incomplete header closed after %v: want about HandshakeTimeout %v", took, handshake)
			} else {
				assert.LessOrEqual(t, took, handshake/2, "bad header closed after %v, want well under HandshakeTimeout %v", took, handshake)
			}
		})
	}
}

// TestDialSourceAddress checks that raft and RPC connections leave from the dialer's bind IP,
// not from the address the kernel would pick (127.0.0.1 for any loopback destination).
func TestDialSourceAddress(t *testing.T) {
	t.Parallel()
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	want := net.ParseIP("127.0.0.2")

	la, err := a.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	lb, err := b.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	ch := acceptAsync(lb)
	c, err := la.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c.Close()
	r := accepted(t, ch, 5*time.Second)
	require.NoError(t, r.err, "Accept")
	defer r.conn.Close()
	got := r.conn.RemoteAddr().(*net.TCPAddr).IP
	assert.True(t, got.Equal(want), "raft: accepting side saw source %v, want %v", got, want)
	got = c.LocalAddr().(*net.TCPAddr).IP
	assert.True(t, got.Equal(want), "raft: dialing side's local address %v, want %v", got, want)

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RemoteAddr)
	})}
	go srv.Serve(b.RPCListener())
	defer srv.Close()
	resp, err := a.HTTPClient(5 * time.Second).Get("http://" + b.Addr().String() + "/whoami")
	require.NoError(t, err, "GET /whoami")
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err, "read the body of /whoami")
	host, _, err := net.SplitHostPort(string(body))
	require.NoError(t, err, "RemoteAddr %q", body)
	got = net.ParseIP(host)
	assert.True(t, got.Equal(want), "rpc: server saw source %v, want %v", got, want)
}

func TestRaftLayerRegistration(t *testing.T) {
	t.Parallel()
	m := newMux(t, "127.0.0.2", nil)
	_, err := m.RaftLayer("bad name")
	assert.ErrorIs(t, err, ErrInvalidName, `RaftLayer("bad name")`)
	l, err := m.RaftLayer("trips/1")
	require.NoError(t, err, `RaftLayer("trips/1")`)
	_, err = m.RaftLayer("trips/1")
	assert.ErrorIs(t, err, ErrAlreadyRegistered, `second RaftLayer("trips/1")`)
	require.NoError(t, l.Close(), "Close")
	assert.NoError(t, l.Close(), "second Close")
	_, err = l.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	assert.ErrorIs(t, err, ErrClosed, "Dial on a closed layer")
	l2, err := m.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer after the first layer's Close: want a layer")
	// Closing the old layer again must not unregister the new one.
	l.Close()
	ch := acceptAsync(l2)
	c, err := l2.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	require.NoError(t, err, "Dial the re-registered layer")
	defer c.Close()
	r := accepted(t, ch, 5*time.Second)
	require.NoError(t, r.err, "Accept on the re-registered layer: want a connection")
	r.conn.Close()
}

// TestCloseUnblocksAccept checks that Close unblocks every Accept, is idempotent, and that the
// Mux refuses work afterwards.
//
// Not parallel: it counts goroutines blocked in Accept.
func TestCloseUnblocksAccept(t *testing.T) {
	m := newMux(t, "127.0.0.2", nil)
	l, err := m.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	rpc := m.RPCListener()
	assert.Same(t, rpc, m.RPCListener(), "RPCListener twice: want the same listener")
	raftAccept := acceptAsync(l)
	rpcAccept := acceptAsync(rpc)
	require.Eventually(t, func() bool { return blockedIn("transport.acceptAsync", "transport.(*listener).Accept(") == 2 },
		5*time.Second, time.Millisecond, "both Accepts blocked before Close")
	require.NoError(t, m.Close(), "Close")
	for name, ch := range map[string]<-chan acceptResult{"raft": raftAccept, "rpc": rpcAccept} {
		r := accepted(t, ch, 5*time.Second)
		assert.ErrorIs(t, r.err, ErrClosed, "%s Accept after Close", name)
		assert.ErrorIs(t, r.err, net.ErrClosed, "%s Accept after Close", name)
	}
	assert.NoError(t, m.Close(), "second Close")
	_, err = l.Accept()
	assert.ErrorIs(t, err, ErrClosed, "Accept on a layer of a closed Mux")
	_, err = m.RaftLayer("trips/2")
	assert.ErrorIs(t, err, ErrClosed, "RaftLayer after Close")
	_, err = m.RPCListener().Accept()
	assert.ErrorIs(t, err, ErrClosed, "RPCListener().Accept after Close")
	_, err = m.DialRPC(context.Background(), "tcp", "127.0.0.3:1")
	assert.ErrorIs(t, err, ErrClosed, "DialRPC after Close")
	if c, err := net.DialTimeout("tcp", m.ListenAddr().String(), time.Second); !assert.Error(t, err, "dial a closed Mux's port: want refused") {
		c.Close()
	}
}

// TestCloseLeavesNoGoroutines closes a Mux with connections in every internal state (in the
// handshake, waiting for an Accept) and checks that no goroutine outlives it.
//
// Not parallel: it counts the process's goroutines.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		m := newMux(t, "127.0.0.2", nil)
		peer := newMux(t, "127.0.0.3", nil)
		_, err := m.RaftLayer("trips/1") // never accepts
		require.NoError(t, err, "RaftLayer")
		m.RPCListener() // never accepts
		d, err := peer.RaftLayer("trips/1")
		require.NoError(t, err, "RaftLayer on the peer")
		var conns []net.Conn
		for i := 0; i < 3; i++ {
			c, err := d.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
			require.NoError(t, err, "Dial")
			conns = append(conns, c)
			rc, err := peer.DialRPC(context.Background(), "tcp", m.Addr().String())
			require.NoError(t, err, "DialRPC")
			conns = append(conns, rc)
			silent, err := net.Dial("tcp", m.Addr().String())
			require.NoError(t, err, "dial without a header")
			conns = append(conns, silent)
		}
		// The handshakes reach their states: the raft and RPC connections wait for an Accept,
		// the silent ones for their header.
		require.Eventually(t, func() bool {
			return blockedIn("transport.(*Mux).handshake", "transport.(*listener).deliver(") == 6 &&
				blockedIn("transport.(*Mux).handshake", "transport.readHeader(") == 3
		}, 5*time.Second, time.Millisecond, "6 connections waiting for an Accept and 3 for their header")

		done := make(chan struct{})
		go func() {
			m.Close()
			close(done)
		}()
		var closed struct{}
		require.Eventually(t, received(done, &closed), 2*time.Second, time.Millisecond, // well under HandshakeTimeout (5s)
			"Close blocked with connections pending")
		for _, c := range conns {
			// The mux dropped each one, whatever its state.
			expectClosedByPeer(t, c, 5*time.Second)
			c.Close()
		}
		peer.Close()
	}()

	// Eventually runs the condition in a goroutine of its own: it is not one of the Mux's.
	if !assert.Eventually(t, func() bool { return runtime.NumGoroutine()-1 <= before }, 5*time.Second, 10*time.Millisecond,
		"goroutines after Close: want at most the %d before", before) {
		var buf bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Logf("%d goroutines, %d before Close:\n%s", runtime.NumGoroutine(), before, buf.String())
	}
}

// TestWrapDial checks the fault-injection hook: every outgoing connection goes through it, and
// DialTimeout bounds a dialer that hangs.
//
// Not parallel: it measures how long a dial through a hanging wrapper takes.
func TestWrapDial(t *testing.T) {
	errInjected := errors.New("injected: link cut")
	var mode atomic.Int32 // 0 pass, 1 refuse, 2 hang until ctx is done
	var dials atomic.Int32
	a := newMux(t, "127.0.0.2", func(c *Config) {
		c.DialTimeout = 200 * time.Millisecond
		c.WrapDial = func(next DialFunc) DialFunc {
			return func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				switch mode.Load() {
				case 1:
					return nil, errInjected
				case 2:
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return next(ctx, network, addr)
			}
		}
	})
	b := newMux(t, "127.0.0.3", nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go srv.Serve(b.RPCListener())
	defer srv.Close()
	l, err := a.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer")
	_, err = b.RaftLayer("trips/1")
	require.NoError(t, err, "RaftLayer on the peer")
	target := raft.ServerAddress(b.Addr().String())
	client := a.HTTPClient(5 * time.Second)
	url := "http://" + b.Addr().String() + "/"

	mode.Store(1)
	_, err = l.Dial(target, time.Second)
	assert.ErrorIs(t, err, errInjected, "raft Dial through a refusing wrapper")
	_, err = client.Get(url)
	assert.ErrorIs(t, err, errInjected, "HTTP through a refusing wrapper")

	mode.Store(2)
	start := time.Now()
	_, err = l.Dial(target, 10*time.Second)
	took := time.Since(start)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "raft Dial(timeout 10s) through a hanging wrapper with DialTimeout 200ms")
	assert.LessOrEqual(t, took, 2*time.Second, "raft Dial(timeout 10s) through a hanging wrapper with DialTimeout 200ms: want a deadline error after about 200ms")

	mode.Store(0)
	n := dials.Load()
	c, err := l.Dial(target, time.Second)
	require.NoError(t, err, "raft Dial through a passing wrapper")
	c.Close()
	resp, err := client.Get(url)
	require.NoError(t, err, "HTTP through a passing wrapper")
	resp.Body.Close()
	assert.Equal(t, int32(2), dials.Load()-n, "dials through the wrapper")
}

// TestUnregisteredPartitionWaits: a raft connection for a partition that registers within
// UnregisteredWait is delivered to it once it does, and carries data; one for a partition that
// does not is closed once the wait is over, not before; with a negative wait it is closed at
// once.
func TestUnregisteredPartitionWaits(t *testing.T) {
	t.Parallel()
	const wait = 700 * time.Millisecond
	a := newMux(t, "127.0.0.2", func(c *Config) { c.UnregisteredWait = wait })
	b := newMux(t, "127.0.0.3", nil)
	d, err := b.RaftLayer("late/1")
	require.NoError(t, err, "RaftLayer")
	c, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c.Close()
	_, err = c.Write([]byte("vote"))
	require.NoError(t, err, "write before the partition registers")
	time.Sleep(150 * time.Millisecond)
	l, err := a.RaftLayer("late/1")
	require.NoError(t, err, "RaftLayer, 150 ms after the dial")
	r := accepted(t, acceptAsync(l), 5*time.Second)
	require.NoError(t, r.err, "Accept: the waiting connection")
	defer r.conn.Close()
	got := make([]byte, 4)
	require.NoError(t, r.conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadFull(r.conn, got)
	require.NoError(t, err, "read what was written before the partition registered")
	assert.Equal(t, "vote", string(got), "bytes written before the partition registered")

	ghost, err := b.RaftLayer("ghost/2")
	require.NoError(t, err, "RaftLayer")
	c2, err := ghost.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c2.Close()
	took := expectClosedByPeer(t, c2, 5*time.Second)
	assert.GreaterOrEqual(t, took, wait-100*time.Millisecond, "a connection for a partition that never registers is closed after the wait")

	now := newMux(t, "127.0.0.4", func(c *Config) { c.UnregisteredWait = -1 })
	c3, err := ghost.Dial(raft.ServerAddress(now.Addr().String()), time.Second)
	require.NoError(t, err, "Dial")
	defer c3.Close()
	took = expectClosedByPeer(t, c3, 5*time.Second)
	assert.Less(t, took, wait/2, "with a negative wait, a connection for an unregistered partition is closed at once")
}
