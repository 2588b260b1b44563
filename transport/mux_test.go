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
)

func TestConfigValidate(t *testing.T) {
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
			if err != nil {
				t.Errorf("%s: Validate() = %v, want nil", tt.desc, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Validate() = nil, want an error mentioning %q", tt.desc, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: Validate() = %q: got no mention of %q", tt.desc, err, w)
			}
		}
		if !strings.HasPrefix(err.Error(), "transport: ") {
			t.Errorf("%s: got error %q, want the prefix \"transport: \"", tt.desc, err)
		}
	}

	var zero Config
	zero.BindAddr = "127.0.0.2:0"
	zero.EnsureDefaults()
	if err := zero.Validate(); err != nil {
		t.Errorf("EnsureDefaults then Validate: got %v, want nil", err)
	}
}

func TestAddresses(t *testing.T) {
	m := newMux(t, "127.0.0.2", nil)
	la := m.ListenAddr().(*net.TCPAddr)
	if !la.IP.Equal(net.ParseIP("127.0.0.2")) || la.Port == 0 {
		t.Fatalf("ListenAddr: got %v, want 127.0.0.2 with a real port", la)
	}
	if got, want := m.Addr().String(), la.String(); got != want {
		t.Errorf("Addr with no AdvertiseAddr: got %q, want the bound address %q", got, want)
	}
	l, err := m.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Addr().String(), la.String(); got != want {
		t.Errorf("RaftLayer.Addr: got %q, want %q", got, want)
	}
	if got, want := m.RPCListener().Addr().String(), la.String(); got != want {
		t.Errorf("RPCListener.Addr: got %q, want %q", got, want)
	}

	adv := newMux(t, "127.0.0.3", func(c *Config) { c.AdvertiseAddr = "node1.example:7170" })
	l2, err := adv.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l2.Addr().String(), "node1.example:7170"; got != want {
		t.Errorf("RaftLayer.Addr with AdvertiseAddr: got %q, want %q", got, want)
	}
}

// TestHeaderRouting dials two partitions of one mux, interleaved, and checks that each layer
// accepts only the connections naming it.
func TestHeaderRouting(t *testing.T) {
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	names := []string{"trips/1", "trips/2"}
	accepting := map[string]*RaftLayer{}
	dialing := map[string]*RaftLayer{}
	for _, n := range names {
		var err error
		if accepting[n], err = a.RaftLayer(n); err != nil {
			t.Fatal(err)
		}
		if dialing[n], err = b.RaftLayer(n); err != nil {
			t.Fatal(err)
		}
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
		if err := <-errc; err != nil {
			t.Fatalf("dial and write: %v", err)
		}
	}
	for _, n := range names {
		for i := 0; i < perName; i++ {
			r := waitAccept(t, acceptAsync(accepting[n]), 5*time.Second)
			if r.err != nil {
				t.Fatalf("%s: Accept: %v", n, r.err)
			}
			buf := make([]byte, 16)
			_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(r.conn, buf); err != nil {
				t.Fatalf("%s: read: %v", n, err)
			}
			if got := strings.TrimSpace(string(buf)); got != n {
				t.Errorf("layer %s accepted a connection for %q, want only %q", n, got, n)
			}
			r.conn.Close()
		}
	}
	// Nothing else is waiting on either layer.
	for _, n := range names {
		ch := acceptAsync(accepting[n])
		select {
		case r := <-ch:
			t.Errorf("layer %s: got an extra connection (err %v), want none", n, r.err)
		case <-time.After(100 * time.Millisecond):
		}
		accepting[n].Close()
		if r := waitAccept(t, ch, 5*time.Second); !errors.Is(r.err, ErrClosed) {
			t.Errorf("Accept after Close: got %v, want ErrClosed", r.err)
		}
	}
}

// TestUnregisteredPartitionClosed checks that a connection for a partition the node does not
// (yet) host is closed, and that it is accepted once the partition registers.
func TestUnregisteredPartitionClosed(t *testing.T) {
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	d, err := b.RaftLayer("ghost/1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expectClosedByPeer(t, c, 5*time.Second)

	// The RPC listener is not registered either until RPCListener is called.
	rc, err := b.DialRPC(context.Background(), "tcp", a.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	expectClosedByPeer(t, rc, 5*time.Second)

	// With an RPC consumer accepting, a raft connection for an unknown partition still goes
	// nowhere.
	rpc := a.RPCListener()
	rpcAccept := acceptAsync(rpc)
	c1, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	expectClosedByPeer(t, c1, 5*time.Second)
	rpc.Close()
	if r := waitAccept(t, rpcAccept, 5*time.Second); r.err == nil {
		r.conn.Close()
		t.Errorf("RPC listener accepted a raft connection for an unknown partition, want it closed")
	}

	l, err := a.RaftLayer("ghost/1")
	if err != nil {
		t.Fatal(err)
	}
	ch := acceptAsync(l)
	c2, err := d.Dial(raft.ServerAddress(a.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	r := waitAccept(t, ch, 5*time.Second)
	if r.err != nil {
		t.Fatalf("Accept after registering: got %v, want a connection", r.err)
	}
	r.conn.Close()
}

// TestBadHeaderClosed writes headers that are not ours, or nothing, and checks the mux closes
// the connection: at once for a bad header, after HandshakeTimeout for a silent peer.
func TestBadHeaderClosed(t *testing.T) {
	const handshake = time.Second
	a := newMux(t, "127.0.0.2", func(c *Config) { c.HandshakeTimeout = handshake })
	if _, err := a.RaftLayer("trips/1"); err != nil {
		t.Fatal(err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tt.in); err != nil {
				t.Fatal(err)
			}
			took := expectClosedByPeer(t, c, handshake+3*time.Second)
			if tt.silent && took < handshake/2 {
				t.Errorf("incomplete header closed after %v: got less than half of HandshakeTimeout %v, want about HandshakeTimeout", took, handshake)
			}
			if !tt.silent && took > handshake/2 {
				t.Errorf("bad header closed after %v, want well under HandshakeTimeout %v", took, handshake)
			}
		})
	}
}

// TestDialSourceAddress checks that raft and RPC connections leave from the dialer's bind IP,
// not from the address the kernel would pick (127.0.0.1 for any loopback destination).
func TestDialSourceAddress(t *testing.T) {
	a := newMux(t, "127.0.0.2", nil)
	b := newMux(t, "127.0.0.3", nil)
	want := net.ParseIP("127.0.0.2")

	la, err := a.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	ch := acceptAsync(lb)
	c, err := la.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := waitAccept(t, ch, 5*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.conn.Close()
	if got := r.conn.RemoteAddr().(*net.TCPAddr).IP; !got.Equal(want) {
		t.Errorf("raft: accepting side saw source %v, want %v", got, want)
	}
	if got := c.LocalAddr().(*net.TCPAddr).IP; !got.Equal(want) {
		t.Errorf("raft: dialing side's local address %v, want %v", got, want)
	}

	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RemoteAddr)
	})}
	go srv.Serve(b.RPCListener())
	defer srv.Close()
	resp, err := a.HTTPClient(5 * time.Second).Get("http://" + b.Addr().String() + "/whoami")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := net.SplitHostPort(string(body))
	if err != nil {
		t.Fatalf("RemoteAddr %q: %v", body, err)
	}
	if got := net.ParseIP(host); !got.Equal(want) {
		t.Errorf("rpc: server saw source %v, want %v", got, want)
	}
}

func TestRaftLayerRegistration(t *testing.T) {
	m := newMux(t, "127.0.0.2", nil)
	if _, err := m.RaftLayer("bad name"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("RaftLayer(\"bad name\"): got %v, want ErrInvalidName", err)
	}
	l, err := m.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.RaftLayer("trips/1"); !errors.Is(err, ErrAlreadyRegistered) {
		t.Errorf("second RaftLayer(\"trips/1\"): got %v, want ErrAlreadyRegistered", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := l.Dial(raft.ServerAddress(m.Addr().String()), time.Second); !errors.Is(err, ErrClosed) {
		t.Errorf("Dial on a closed layer: got %v, want ErrClosed", err)
	}
	l2, err := m.RaftLayer("trips/1")
	if err != nil {
		t.Fatalf("RaftLayer after the first layer's Close: got %v, want a layer", err)
	}
	// Closing the old layer again must not unregister the new one.
	l.Close()
	ch := acceptAsync(l2)
	c, err := l2.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if r := waitAccept(t, ch, 5*time.Second); r.err != nil {
		t.Fatalf("Accept on the re-registered layer: got %v, want a connection", r.err)
	} else {
		r.conn.Close()
	}
}

// TestCloseUnblocksAccept checks that Close unblocks every Accept, is idempotent, and that the
// Mux refuses work afterwards.
func TestCloseUnblocksAccept(t *testing.T) {
	m := newMux(t, "127.0.0.2", nil)
	l, err := m.RaftLayer("trips/1")
	if err != nil {
		t.Fatal(err)
	}
	rpc := m.RPCListener()
	if again := m.RPCListener(); again != rpc {
		t.Errorf("RPCListener twice: got two listeners, want the same one")
	}
	raftAccept := acceptAsync(l)
	rpcAccept := acceptAsync(rpc)
	time.Sleep(20 * time.Millisecond) // let both block
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, ch := range map[string]<-chan acceptResult{"raft": raftAccept, "rpc": rpcAccept} {
		r := waitAccept(t, ch, 5*time.Second)
		if !errors.Is(r.err, ErrClosed) || !errors.Is(r.err, net.ErrClosed) {
			t.Errorf("%s Accept after Close: got %v, want ErrClosed (and net.ErrClosed)", name, r.err)
		}
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: got %v, want nil", err)
	}
	if _, err := l.Accept(); !errors.Is(err, ErrClosed) {
		t.Errorf("Accept on a layer of a closed Mux: got %v, want ErrClosed", err)
	}
	if _, err := m.RaftLayer("trips/2"); !errors.Is(err, ErrClosed) {
		t.Errorf("RaftLayer after Close: got %v, want ErrClosed", err)
	}
	if _, err := m.RPCListener().Accept(); !errors.Is(err, ErrClosed) {
		t.Errorf("RPCListener().Accept after Close: got %v, want ErrClosed", err)
	}
	if _, err := m.DialRPC(context.Background(), "tcp", "127.0.0.3:1"); !errors.Is(err, ErrClosed) {
		t.Errorf("DialRPC after Close: got %v, want ErrClosed", err)
	}
	if c, err := net.DialTimeout("tcp", m.ListenAddr().String(), time.Second); err == nil {
		c.Close()
		t.Errorf("dial a closed Mux's port: got a connection, want refused")
	}
}

// TestCloseLeavesNoGoroutines closes a Mux with connections in every internal state (in the
// handshake, waiting for an Accept) and checks that no goroutine outlives it.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		m := newMux(t, "127.0.0.2", nil)
		peer := newMux(t, "127.0.0.3", nil)
		if _, err := m.RaftLayer("trips/1"); err != nil { // never accepts
			t.Fatal(err)
		}
		m.RPCListener() // never accepts
		d, err := peer.RaftLayer("trips/1")
		if err != nil {
			t.Fatal(err)
		}
		var conns []net.Conn
		for i := 0; i < 3; i++ {
			c, err := d.Dial(raft.ServerAddress(m.Addr().String()), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			rc, err := peer.DialRPC(context.Background(), "tcp", m.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, rc)
			silent, err := net.Dial("tcp", m.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, silent)
		}
		time.Sleep(50 * time.Millisecond) // let the handshakes reach their states

		done := make(chan struct{})
		go func() {
			m.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Second): // well under HandshakeTimeout (5s)
			t.Fatalf("Close blocked with connections pending")
		}
		for _, c := range conns {
			// The mux dropped each one, whatever its state.
			expectClosedByPeer(t, c, 5*time.Second)
			c.Close()
		}
		peer.Close()
	}()

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > before {
		var buf bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&buf, 1)
		t.Fatalf("got %d goroutines after Close, want at most %d as before:\n%s", got, before, buf.String())
	}
}

// TestWrapDial checks the fault-injection hook: every outgoing connection goes through it, and
// DialTimeout bounds a dialer that hangs.
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
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RaftLayer("trips/1"); err != nil {
		t.Fatal(err)
	}
	target := raft.ServerAddress(b.Addr().String())
	client := a.HTTPClient(5 * time.Second)
	url := "http://" + b.Addr().String() + "/"

	mode.Store(1)
	if _, err := l.Dial(target, time.Second); !errors.Is(err, errInjected) {
		t.Errorf("raft Dial through a refusing wrapper: got %v, want %v", err, errInjected)
	}
	if _, err := client.Get(url); !errors.Is(err, errInjected) {
		t.Errorf("HTTP through a refusing wrapper: got %v, want %v", err, errInjected)
	}

	mode.Store(2)
	start := time.Now()
	_, err = l.Dial(target, 10*time.Second)
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > 2*time.Second {
		t.Errorf("raft Dial(timeout 10s) through a hanging wrapper with DialTimeout 200ms: got %v after %v, want a deadline error after about 200ms", err, took)
	}

	mode.Store(0)
	n := dials.Load()
	c, err := l.Dial(target, time.Second)
	if err != nil {
		t.Fatalf("raft Dial through a passing wrapper: %v", err)
	}
	c.Close()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("HTTP through a passing wrapper: %v", err)
	}
	resp.Body.Close()
	if got, want := dials.Load()-n, int32(2); got != want {
		t.Errorf("dials through the wrapper: got %d, want %d", got, want)
	}
}
