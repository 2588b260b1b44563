package transport

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// RaftLayer is one partition's raft.StreamLayer over a Mux: Accept yields the connections whose
// header names this partition, Dial connects to a peer's Mux and names it. Build the partition's
// transport with
//
//	raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, ...})
//
// Every replica's raft ServerAddress is its node's Mux advertise address, the same for all
// partitions. Methods are safe for concurrent use.
type RaftLayer struct {
	mux  *Mux
	name string
	ln   *listener
	hdr  []byte
}

var _ raft.StreamLayer = (*RaftLayer)(nil)

// RaftLayer registers partition name (see ValidateName, e.g. "trips/3") and returns its stream
// layer. A connection for a name that is not registered waits for it up to
// Config.UnregisteredWait, and is closed then. Errors: an
// ErrInvalidName wrap, ErrAlreadyRegistered while another layer for name is open, ErrClosed
// after Close. Closing the layer (raft's NetworkTransport does it on Close) unregisters name.
func (m *Mux) RaftLayer(name string) (*RaftLayer, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if _, ok := m.raft[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrAlreadyRegistered, name)
	}
	r := &RaftLayer{mux: m, name: name, hdr: raftHeader(name)}
	r.ln = newListener(m.advertise, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.raft[name] == r.ln {
			delete(m.raft, name)
		}
	})
	m.raft[name] = r.ln
	close(m.registered) // wakes the connections waiting for a layer (awaitRaft)
	m.registered = make(chan struct{})
	return r, nil
}

// Name returns the partition name the layer was registered with.
func (r *RaftLayer) Name() string { return r.name }

// Accept blocks until a peer connects for this partition, then returns the connection (the
// header already consumed). After Close, or the Mux's Close, it returns ErrClosed.
func (r *RaftLayer) Accept() (net.Conn, error) { return r.ln.Accept() }

// Close unregisters the partition and unblocks Accept. Connections already accepted or dialed
// stay open (raft closes its own). Idempotent; always nil.
func (r *RaftLayer) Close() error { return r.ln.Close() }

// Addr returns the Mux's advertise address, which raft uses as this replica's LocalAddr.
func (r *RaftLayer) Addr() net.Addr { return r.ln.Addr() }

// Dial connects to the Mux at address (a peer's advertise address) from the bind IP, and writes
// the header naming this partition. It blocks at most the smaller of timeout (if positive) and
// Config.DialTimeout. The caller owns the connection. After Close it returns ErrClosed.
func (r *RaftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-r.ln.closed:
		return nil, ErrClosed
	default:
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return r.mux.dial(ctx, string(address), r.hdr)
}
