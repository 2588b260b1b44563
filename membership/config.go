package membership

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Errors returned by this package.
var (
	// ErrInvalidConfig is matched (errors.Is) by every error Config.Validate reports; the message
	// names the field ("membership: Config.Meta.GossipAddr is required").
	ErrInvalidConfig = errors.New("membership: invalid config")
	// ErrClosed is returned by Leave after Close.
	ErrClosed = errors.New("membership: closed")
)

// configError is one Config violation. It matches ErrInvalidConfig.
type configError string

func (e configError) Error() string        { return "membership: " + string(e) }
func (e configError) Is(target error) bool { return target == ErrInvalidConfig }

func invalid(format string, args ...any) error { return configError(fmt.Sprintf(format, args...)) }

// Config configures Start. Zero durations and multipliers take the defaults of DefaultConfig,
// which are tuned for a LAN of a few nodes.
type Config struct {
	// Meta is what this node announces. ID and GossipAddr are required. GossipAddr is the
	// host:port this node binds (unless BindAddr is set) and advertises for gossip (UDP and TCP);
	// its host must be an IP address or a name resolving to one, not an unspecified address
	// (0.0.0.0), and its port must not be 0. Its JSON form must fit in 512 bytes.
	Meta Meta

	// BindAddr is the host:port to bind, when it differs from Meta.GossipAddr (a NAT, or
	// "0.0.0.0:7946"). Its port must not be 0. Empty means Meta.GossipAddr.
	BindAddr string

	// Seeds are gossip addresses (host:port) to join. Meta.GossipAddr among them is skipped;
	// empty (or only self) means this is the first node. Start does not wait for the join: a
	// background goroutine retries every ReconnectInterval until one seed answers.
	Seeds []string

	// Replicas returns the replicas this node hosts. It is called when this node's state is
	// gossiped (push/pull, Refresh, Leave), from memberlist's goroutines or the caller of Refresh
	// or Leave. Membership serializes the calls, so it must not call Refresh or Leave; it may
	// call the read methods (Self, Members, Member, Alive, Hosting). It must be fast and must not
	// block: a push/pull waits for it. Membership copies the returned slice. Nil means no
	// replicas.
	Replicas func() []Replica

	// Keys, when not empty, is the gossip keyring (16, 24 or 32 bytes each, AES-GCM): the first
	// key encrypts every message, UDP and TCP, and messages under any key are accepted; a
	// message that is not encrypted, or under no key of the ring, is dropped. Every node must
	// share a key. Nil means plaintext gossip.
	Keys [][]byte

	// OnChange is called when any member's state, meta or replicas change (this node's
	// included). Calls come from one goroutine owned by Membership, never under its locks, and
	// are coalesced: one call may cover several changes, and a change is always followed by a
	// call that starts after it. It may call Membership's read methods. Nil means none.
	OnChange func()

	// Logger receives memberlist's own log lines ([DEBUG] and [INFO] at debug level, [WARN] and
	// [ERR] at warn level, with "component"="memberlist") and this package's. Nil means
	// slog.Default().
	Logger *slog.Logger

	// ProbeInterval is memberlist's failure-detection period: each period this node probes one
	// other node (round robin). Default 500ms.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct probe waits for its ack before indirect probes; it must
	// be less than ProbeInterval. Default ProbeInterval/2.
	ProbeTimeout time.Duration
	// PushPullInterval is the period of the full state exchange (TCP) with one random node; it
	// bounds how stale a missed broadcast can leave a member's replicas. Default 2s.
	PushPullInterval time.Duration
	// GossipInterval is the period of UDP gossip (broadcasts) to GossipNodes random nodes.
	// Default 100ms.
	GossipInterval time.Duration
	// SuspicionMult scales the time a suspected node has to refute before it is declared dead:
	// SuspicionMult * max(1, log10(nodes)) * ProbeInterval (memberlist's formula), stretched up
	// to SuspicionMaxTimeoutMult times that when too few other nodes confirm. Default 4.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the stretched suspicion timeout (see SuspicionMult).
	// Default 6.
	SuspicionMaxTimeoutMult int
	// DeadNodeReclaimTime is how long a node must have been dead before another process with
	// the same ID but another address may take its name. Zero (the default) means at once (as
	// soon as memberlist declares the old address dead or left). Note that memberlist's own zero
	// means never; this package maps its zero to 1ns.
	DeadNodeReclaimTime time.Duration
	// TCPTimeout bounds a TCP exchange (push/pull, join, direct sends, fallback probes).
	// Default 5s.
	TCPTimeout time.Duration
	// ReconnectInterval is the period of the background join: until one seed answers, and then,
	// while some member is dead (not left), to rejoin through the dead members' last gossip
	// addresses and the seeds, so that gossip heals after a network partition (memberlist alone
	// never contacts a node it declared dead again). Default 5s; negative disables reconnects
	// after the first join.
	ReconnectInterval time.Duration
}

// DefaultConfig returns a Config with every timing at its default; Meta and the rest are zero.
func DefaultConfig() Config {
	return Config{
		ProbeInterval:           500 * time.Millisecond,
		ProbeTimeout:            250 * time.Millisecond,
		PushPullInterval:        2 * time.Second,
		GossipInterval:          100 * time.Millisecond,
		SuspicionMult:           4,
		SuspicionMaxTimeoutMult: 6,
		TCPTimeout:              5 * time.Second,
		ReconnectInterval:       5 * time.Second,
	}
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.ProbeInterval == 0 {
		c.ProbeInterval = d.ProbeInterval
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = c.ProbeInterval / 2
	}
	if c.PushPullInterval == 0 {
		c.PushPullInterval = d.PushPullInterval
	}
	if c.GossipInterval == 0 {
		c.GossipInterval = d.GossipInterval
	}
	if c.SuspicionMult == 0 {
		c.SuspicionMult = d.SuspicionMult
	}
	if c.SuspicionMaxTimeoutMult == 0 {
		c.SuspicionMaxTimeoutMult = d.SuspicionMaxTimeoutMult
	}
	if c.TCPTimeout == 0 {
		c.TCPTimeout = d.TCPTimeout
	}
	if c.ReconnectInterval == 0 {
		c.ReconnectInterval = d.ReconnectInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports every violation in c (after defaults are applied to zero fields), joined;
// each matches ErrInvalidConfig and names its field. It does no I/O except resolving the host of
// Meta.GossipAddr when it is a name.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Meta.ID == "" {
		errs = append(errs, invalid("Config.Meta.ID is required"))
	}
	if c.Meta.GossipAddr == "" {
		errs = append(errs, invalid("Config.Meta.GossipAddr is required"))
	} else if _, _, err := advertiseAddr(c.Meta.GossipAddr); err != nil {
		errs = append(errs, err)
	}
	if c.BindAddr != "" {
		if _, _, err := splitHostPort("Config.BindAddr", c.BindAddr); err != nil {
			errs = append(errs, err)
		}
	}
	if b, err := encodeMeta(c.Meta); err != nil {
		errs = append(errs, invalid("Config.Meta: %v", err))
	} else if len(b) > memberlist.MetaMaxSize {
		errs = append(errs, invalid("Config.Meta is %d bytes as JSON, more than memberlist's limit of %d", len(b), memberlist.MetaMaxSize))
	}
	for i, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			errs = append(errs, invalid("Config.Seeds[%d] %q is not host:port: %v", i, s, err))
		}
	}
	positive := []struct {
		name string
		d    time.Duration
	}{
		{"ProbeInterval", c.ProbeInterval},
		{"ProbeTimeout", c.ProbeTimeout},
		{"PushPullInterval", c.PushPullInterval},
		{"GossipInterval", c.GossipInterval},
		{"TCPTimeout", c.TCPTimeout},
	}
	for _, p := range positive {
		if p.d < 0 {
			errs = append(errs, invalid("Config.%s is %v, want > 0 (or 0 for the default)", p.name, p.d))
		}
	}
	if c.ProbeTimeout >= c.ProbeInterval && c.ProbeInterval > 0 {
		errs = append(errs, invalid("Config.ProbeTimeout %v must be less than Config.ProbeInterval %v", c.ProbeTimeout, c.ProbeInterval))
	}
	if c.SuspicionMult < 0 {
		errs = append(errs, invalid("Config.SuspicionMult is %d, want > 0 (or 0 for the default)", c.SuspicionMult))
	}
	if c.SuspicionMaxTimeoutMult < 0 {
		errs = append(errs, invalid("Config.SuspicionMaxTimeoutMult is %d, want > 0 (or 0 for the default)", c.SuspicionMaxTimeoutMult))
	}
	if c.DeadNodeReclaimTime < 0 {
		errs = append(errs, invalid("Config.DeadNodeReclaimTime is %v, want >= 0", c.DeadNodeReclaimTime))
	}
	return errors.Join(errs...)
}

// splitHostPort splits a host:port whose port must be set (not 0).
func splitHostPort(field, addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, invalid("%s %q is not host:port: %v", field, addr, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port <= 0 || port > 65535 {
		return "", 0, invalid("%s %q: port must be 1-65535 (0 is not allowed: the port is advertised)", field, addr)
	}
	return host, port, nil
}

// advertiseAddr resolves Meta.GossipAddr to the IP and port memberlist advertises.
func advertiseAddr(addr string) (net.IP, int, error) {
	host, port, err := splitHostPort("Config.Meta.GossipAddr", addr)
	if err != nil {
		return nil, 0, err
	}
	ip := net.ParseIP(host)
	if ip == nil {
		ips, err := net.LookupIP(host)
		if err != nil || len(ips) == 0 {
			return nil, 0, invalid("Config.Meta.GossipAddr %q: host does not resolve: %v", addr, err)
		}
		ip = ips[0]
		for _, c := range ips {
			if c.To4() != nil {
				ip = c
				break
			}
		}
	}
	if ip.IsUnspecified() {
		return nil, 0, invalid("Config.Meta.GossipAddr %q must be an address other nodes can reach, not an unspecified one (set BindAddr to bind all interfaces)", addr)
	}
	return ip, port, nil
}

// memberlistConfig builds memberlist's configuration from c (defaults applied, validated).
func (c Config) memberlistConfig() (*memberlist.Config, error) {
	ip, port, err := advertiseAddr(c.Meta.GossipAddr)
	if err != nil {
		return nil, err
	}
	bindHost, bindPort := ip.String(), port
	if c.BindAddr != "" {
		if bindHost, bindPort, err = splitHostPort("Config.BindAddr", c.BindAddr); err != nil {
			return nil, err
		}
		if bindHost == "" {
			bindHost = "0.0.0.0"
		}
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.Meta.ID
	mc.BindAddr, mc.BindPort = bindHost, bindPort
	mc.AdvertiseAddr, mc.AdvertisePort = ip.String(), port
	mc.ProbeInterval = c.ProbeInterval
	mc.ProbeTimeout = c.ProbeTimeout
	mc.PushPullInterval = c.PushPullInterval
	mc.GossipInterval = c.GossipInterval
	mc.SuspicionMult = c.SuspicionMult
	mc.SuspicionMaxTimeoutMult = c.SuspicionMaxTimeoutMult
	mc.TCPTimeout = c.TCPTimeout
	// Uncompressed: memberlist's LZW allocates and clears a 64 KiB table for every message
	// (a quarter of an idle node's gossip CPU) to shrink pings of a few dozen bytes. Compressed
	// messages (from nodes that still compress) are read all the same.
	mc.EnableCompression = false
	mc.DeadNodeReclaimTime = c.DeadNodeReclaimTime
	if mc.DeadNodeReclaimTime == 0 {
		mc.DeadNodeReclaimTime = time.Nanosecond // memberlist's zero means never
	}
	mc.Logger = newLogBridge(c.Logger)
	if len(c.Keys) > 0 {
		kr, err := memberlist.NewKeyring(c.Keys[1:], c.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("membership: Config.Keys: %w", err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	return mc, nil
}
