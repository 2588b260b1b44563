package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"
)

// DialFunc opens a TCP connection to address ("host:port") for the mux. network is "tcp". It
// must honour ctx (deadline and cancellation) and may be called from many goroutines at once.
// Its signature matches (*net.Dialer).DialContext.
type DialFunc func(ctx context.Context, network, address string) (net.Conn, error)

// Config configures a Mux. Zero durations and a nil Logger are replaced by their defaults in
// New (see EnsureDefaults); BindAddr is required.
type Config struct {
	// BindAddr is the host:port the node listens on, for example "127.0.0.2:7170". Port 0 picks
	// a free port (read it back with (*Mux).ListenAddr). Its host is also the source address of
	// every outgoing connection (see the package documentation), so it should be a specific IP;
	// an empty or unspecified host ("", "0.0.0.0", "::") lets the kernel choose the source and
	// requires AdvertiseAddr.
	BindAddr string
	// AdvertiseAddr is the host:port peers dial to reach this node, and the raft ServerAddress
	// of every partition replica it hosts. Default: the address actually bound (BindAddr with
	// port 0 resolved).
	AdvertiseAddr string
	// DialTimeout bounds connecting to a peer and writing the connection header. Default 3s.
	DialTimeout time.Duration
	// HandshakeTimeout bounds reading the header of an accepted connection; a peer silent for
	// longer is disconnected. Default 5s.
	HandshakeTimeout time.Duration
	// UnregisteredWait is how long a raft connection naming a partition that has no layer
	// registered here waits for one before it is closed: a replica about to open (a split's new
	// partition, whose first candidate asks for votes as soon as its own replica opens, often
	// before its peers' replicas have) then answers the request instead of failing it, which
	// would cost the candidate an election timeout (hundreds of milliseconds). Default 1s;
	// negative: closed at once.
	UnregisteredWait time.Duration
	// Logger receives rejected connections (debug or warn) and accept errors. Default
	// slog.Default().
	Logger *slog.Logger
	// WrapDial, if set, wraps the dialer used for every outgoing connection (raft and RPC).
	// It is called once, in New, with the default dialer (a net.Dialer whose LocalAddr is the
	// bind IP). It is the fault-injection hook: a test can refuse, delay or wrap connections.
	// The mux writes its header on whatever connection the wrapped dialer returns.
	WrapDial func(next DialFunc) DialFunc
	// ServerTLS, when set, is the TLS configuration of every accepted connection: the TLS
	// handshake (bounded by HandshakeTimeout) comes before the connection header, so a peer
	// that fails it never reaches raft or the RPC server. It should require and verify a client
	// certificate (security.Certs.PeerServerConfig). Nil: plaintext.
	ServerTLS *tls.Config
	// ClientTLS, when set, is the TLS configuration of every outgoing connection; the mux dials
	// with a copy whose ServerName is the dialed host, and its VerifyConnection sees that host
	// as ConnectionState.ServerName even for an IP address, which TLS does not send as SNI
	// (security.Certs.PeerClientConfig). Set it
	// exactly when ServerTLS is set: nodes of one cluster all speak TLS or none does. Nil:
	// plaintext.
	ClientTLS *tls.Config
}

// DefaultConfig returns the tunables' defaults; BindAddr and AdvertiseAddr are left empty.
func DefaultConfig() Config {
	return Config{
		DialTimeout:      3 * time.Second,
		HandshakeTimeout: 5 * time.Second,
		UnregisteredWait: time.Second,
		Logger:           slog.Default(),
	}
}

// EnsureDefaults fills every zero tunable and a nil Logger with its default.
func (c *Config) EnsureDefaults() {
	d := DefaultConfig()
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.UnregisteredWait == 0 {
		c.UnregisteredWait = d.UnregisteredWait
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
}

// Validate reports every violation at once (joined with errors.Join), or nil.
func (c Config) Validate() error {
	var errs []error
	bindUnspecified := false
	if c.BindAddr == "" {
		errs = append(errs, errors.New("transport: Config.BindAddr is required"))
	} else if host, port, err := net.SplitHostPort(c.BindAddr); err != nil {
		errs = append(errs, fmt.Errorf("transport: Config.BindAddr %q: %w", c.BindAddr, err))
	} else {
		if err := checkPort(port, true); err != nil {
			errs = append(errs, fmt.Errorf("transport: Config.BindAddr %q: %w", c.BindAddr, err))
		}
		ip := net.ParseIP(host)
		bindUnspecified = host == "" || (ip != nil && ip.IsUnspecified())
	}
	if c.AdvertiseAddr == "" {
		if bindUnspecified {
			errs = append(errs, fmt.Errorf("transport: Config.AdvertiseAddr is required when BindAddr %q has no specific host", c.BindAddr))
		}
	} else if host, port, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
		errs = append(errs, fmt.Errorf("transport: Config.AdvertiseAddr %q: %w", c.AdvertiseAddr, err))
	} else {
		if err := checkPort(port, false); err != nil {
			errs = append(errs, fmt.Errorf("transport: Config.AdvertiseAddr %q: %w", c.AdvertiseAddr, err))
		}
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			errs = append(errs, fmt.Errorf("transport: Config.AdvertiseAddr %q: host must be dialable", c.AdvertiseAddr))
		}
	}
	if c.DialTimeout <= 0 {
		errs = append(errs, fmt.Errorf("transport: Config.DialTimeout %v must be positive", c.DialTimeout))
	}
	if (c.ServerTLS == nil) != (c.ClientTLS == nil) {
		errs = append(errs, errors.New("transport: Config.ServerTLS and Config.ClientTLS must be set together"))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("transport: Config.HandshakeTimeout %v must be positive", c.HandshakeTimeout))
	}
	if c.Logger == nil {
		errs = append(errs, errors.New("transport: Config.Logger is required"))
	}
	return errors.Join(errs...)
}

// checkPort accepts a decimal port in 1..65535, or 0 when zeroOK.
func checkPort(port string, zeroOK bool) error {
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !zeroOK) {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}
