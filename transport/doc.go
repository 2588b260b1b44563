// Package transport gives each node one TCP listener (a Mux) that carries the raft traffic of
// every partition it hosts and the node-to-node RPC (request forwarding), routing each
// connection by a header its dialer writes first.
//
// # Use
//
// A node creates one Mux, then per hosted partition a RaftLayer (a raft.StreamLayer) wrapped
// in raft.NewNetworkTransportWithConfig; it serves an http.Server on RPCListener and forwards
// requests with HTTPClient, whose URLs name the peer's Mux address. The raft ServerAddress of
// every replica on a node is the node's advertise address (Mux.Addr), the same for all its
// partitions: the header, not the address, says which group a connection belongs to.
//
// # Connection header
//
// The dialer writes, right after connecting and before any payload:
//
//	byte 0      magic and protocol version: 'S' (0x53) for version 1
//	byte 1      kind: 'R' (0x52) raft, 'H' (0x48) RPC (HTTP/1.1)
//	raft only:
//	byte 2      n, the length of the partition name, 1..255
//	bytes 3..   the partition name, n bytes of [A-Za-z0-9._/:-], e.g. "trips/3"
//
// The acceptor reads exactly the header, within Config.HandshakeTimeout, and hands the
// connection to the registered consumer. There is no reply: a connection with a bad header
// (logged at warn), a silent one (debug), or one for a partition or RPC listener not registered
// (debug) is closed, and the dialer sees EOF or a reset on its first read. A raft connection
// for a partition not registered first waits for it, up to Config.UnregisteredWait (1 s by
// default), and is delivered when it registers: a split's new partition's first candidate asks
// for votes as soon as its replica opens, often just before its peers' replicas do, and a
// failed request costs it an election timeout. raft retries with backoff, so a node that has
// not yet opened a partition after that simply refuses it for a while.
//
// # TLS
//
// With Config.ServerTLS and ClientTLS set, every connection is TLS from its first byte: the
// acceptor completes the handshake (within HandshakeTimeout, counted with the header) before
// it reads the header, so a peer without a certificate the configuration accepts (for the
// node, security.Certs: a node certificate signed by the cluster's CA) never reaches raft or
// the RPC server, and the dialer verifies the peer it dialed before writing its header. A
// refused handshake is logged at warn with the remote address. The header and everything
// after it travel inside the TLS stream.
//
// # Source address
//
// Every outgoing connection, raft and RPC, is dialed from the node's bind IP (net.Dialer
// LocalAddr = BindAddr's IP with port 0), never from an address the kernel picks. A test can
// therefore bind nodes to 127.0.0.2, 127.0.0.3, ... and cut the link between two nodes in one
// direction or both with iptables rules on source and destination address alone. With an
// unspecified bind host (0.0.0.0, ::) the kernel chooses the source and AdvertiseAddr is
// required.
//
// # Fault injection
//
// Config.WrapDial wraps the dialer of every outgoing connection (refuse, delay, wrap the
// net.Conn); production code leaves it nil. The jepsen harness cuts links with iptables
// instead, which also covers accepted connections.
//
// # Caveats
//
//   - Because of the source-address rule, a node bound to a specific IP reaches only peers
//     routable from that IP: a node bound to a loopback address cannot talk to another host.
//   - Close the raft transports (and raft) before the Mux. After the Mux's Close, a
//     NetworkTransport still running logs accept errors until it is closed.
//   - Mux.Close closes listeners and connections still being routed, not connections already
//     accepted or dialed: those belong to raft and net/http, which close them on their own
//     shutdown.
//   - An accepted connection waits, holding a goroutine, until its consumer calls Accept. raft's
//     NetworkTransport and http.Server accept continuously; a consumer that stops accepting
//     without closing its listener holds connections until the Mux's Close.
//   - Each accepted connection costs a goroutine for at most HandshakeTimeout before its header
//     is read; there is no limit on concurrent handshakes.
//   - The HTTP client pool closes idle connections after 60s. An http.Server on RPCListener
//     should keep idle connections longer (IdleTimeout above 60s), or a request sent on a
//     connection the server is closing fails; net/http retries it only if it is replayable
//     (GET, or a body with GetBody and an Idempotency-Key header).
//   - The header is neither authenticated nor encrypted; the port must be on a trusted network.
package transport
