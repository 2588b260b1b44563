package delayproxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// MaxInFlight bounds the bytes one direction of one connection holds while they wait.
const MaxInFlight = 8 << 20

// Proxy forwards the connections accepted on its listener to Target, each direction delayed
// by Delay. Its methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on listen (host:port; port 0 picks one) and forwards to target with delay in
// each direction. Errors: the listen's.
func Start(listen, target string, delay time.Duration) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target and forwards both ways until both directions end.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	t, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	if !p.track(t) {
		return
	}
	defer p.untrack(t)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.forward(t, c) }()
	go func() { defer wg.Done(); p.forward(c, t) }()
	wg.Wait()
}

// chunk is bytes read at a time, to be written at due.
type chunk struct {
	b   []byte
	due time.Time
}

// forward copies src to dst, each chunk written Delay after it was read. At src's end it
// half-closes dst once every chunk is written; a write error closes src.
func (p *Proxy) forward(dst, src net.Conn) {
	q := make(chan chunk, 1024)
	budget := make(chan struct{}, MaxInFlight/(32<<10))
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				budget <- struct{}{}
				q <- chunk{b: buf[:n], due: time.Now().Add(p.delay)}
			}
			if err != nil {
				return
			}
		}
	}()
	failed := false
	for ch := range q {
		<-budget
		if failed {
			continue
		}
		if d := time.Until(ch.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(ch.b); err != nil {
			failed = true
			src.Close()
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok && !failed {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}
