package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/security"
)

// Read consistency levels, the values of the consistency query parameter of every read.
const (
	// ConsistencyStrong reads through the partition leader (raft mode, linearizable) or the master
	// (async mode, read-your-writes). The server's default.
	ConsistencyStrong = "strong"
	// ConsistencyStale reads any replica (raft mode) or a minion (async mode): it may miss recent
	// writes but is served while the leader or master is unavailable.
	ConsistencyStale = "stale"
)

// Defaults of Config, used by DefaultConfig and by New for every zero field.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxAttempts    = 5
	DefaultBackoffBase    = 100 * time.Millisecond
	DefaultBackoffMax     = 2 * time.Second
	// DefaultAdminTimeout outlasts the server's bound on one admin change (api.Config's
	// AdminTimeout, 30m), so that its answer, 503 when the change ran out of time, arrives.
	DefaultAdminTimeout = 31 * time.Minute
)

// EndpointCooldown is how long an endpoint that failed (connection error, timeout, 5xx) is tried
// after the others. It is a hint for ordering only: an endpoint in cool-down is still tried when
// its turn comes, and a success on it ends the cool-down at once.
const EndpointCooldown = time.Second

// Config configures a Client. A zero field (nil, "", 0) takes its default (see DefaultConfig)
// when the Client is built; only Endpoints has none.
type Config struct {
	// Endpoints are the base URLs of the cluster's nodes, such as "http://127.0.0.1:7070"
	// (scheme http or https, host, optionally a path prefix; no query or fragment). Any node
	// serves any request, forwarding it as needed. At least one is required.
	Endpoints []string
	// Datastore is the name of the datastore that the cell methods address. It may be empty for a
	// client that only calls Cluster, Ready and Healthy; cell methods then fail with
	// ErrInvalidArgument. See Client.WithDatastore.
	Datastore string
	// HTTPClient sends the requests. Nil means a client of its own, built on a clone of
	// http.DefaultTransport. Its Timeout, if set, applies on top of RequestTimeout.
	HTTPClient *http.Client
	// TLS configures https endpoints when HTTPClient is nil: the CAs to trust and, for
	// authentication by certificate, the client certificate (security.ClientTLS builds one from
	// PEM files). Nil: the system's roots, no client certificate.
	TLS *tls.Config
	// Token, when set, is sent with every request as "Authorization: Bearer <Token>" (the
	// server's principals file holds its SHA-256). A 401 or 403 answer is not retried.
	Token string
	// RequestTimeout bounds one attempt: sending the request and reading the whole answer.
	// Default 10s. A write attempt that runs out of time is indeterminate.
	RequestTimeout time.Duration
	// AdminTimeout bounds one attempt of an admin change (AddVoter, RemoveVoter,
	// TransferLeader, MoveReplica, Rebalance, Drain): adding a voter waits for it to catch up,
	// a rebalance moves many replicas. Default DefaultAdminTimeout (31m). Admin reads (Nodes,
	// Partitions) use RequestTimeout; Backup and Restore streams are bounded by ctx only.
	AdminTimeout time.Duration
	// MaxAttempts is the largest number of attempts of one call, the first included. Default 5;
	// 1 disables retries.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the wait before a retry: attempt n (n >= 1 is the first
	// retry) waits a uniformly random time in [0, min(BackoffMax, BackoffBase*2^(n-1))) ("full
	// jitter"), or the answer's Retry-After capped at BackoffMax when that is longer.
	// Defaults 100ms and 2s.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Consistency is the read consistency of reads that do not choose one (ConsistencyStrong or
	// ConsistencyStale). Default ConsistencyStrong.
	Consistency string
	// NoLeaderRouting turns leader routing off. By default a single-row write or strong read
	// goes first to the endpoint that leads the row's partition, as learned from earlier
	// answers (the Schemaless-Shards and Schemaless-Leader headers), which saves the hop a
	// node takes to forward the request to its leader; requests about several rows, and rows
	// whose leader is unknown or in cool-down, rotate over the endpoints as before.
	NoLeaderRouting bool
}

// DefaultConfig returns a Config holding every default and no endpoint or datastore.
func DefaultConfig() Config {
	return Config{
		RequestTimeout: DefaultRequestTimeout,
		AdminTimeout:   DefaultAdminTimeout,
		MaxAttempts:    DefaultMaxAttempts,
		BackoffBase:    DefaultBackoffBase,
		BackoffMax:     DefaultBackoffMax,
		Consistency:    ConsistencyStrong,
	}
}

// withDefaults returns c with every zero field set to its default. It does not copy Endpoints.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.AdminTimeout == 0 {
		c.AdminTimeout = d.AdminTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = d.BackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = max(d.BackoffMax, c.BackoffBase)
	}
	if c.Consistency == "" {
		c.Consistency = d.Consistency
	}
	return c
}

// Validate reports every field of c that is invalid once zero fields take their defaults, as
// one error joining one error per violation; each wraps ErrInvalidConfig. It returns nil when c
// is usable by New.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(c.Endpoints) == 0 {
		bad("Endpoints is empty")
	}
	for i, e := range c.Endpoints {
		if _, err := normalizeEndpoint(e); err != nil {
			bad("Endpoints[%d]: %v", i, err)
		}
	}
	if c.RequestTimeout < 0 {
		bad("RequestTimeout %s is negative", c.RequestTimeout)
	}
	if c.AdminTimeout < 0 {
		bad("AdminTimeout %s is negative", c.AdminTimeout)
	}
	if c.MaxAttempts < 0 {
		bad("MaxAttempts %d is negative", c.MaxAttempts)
	}
	if c.BackoffBase < 0 {
		bad("BackoffBase %s is negative", c.BackoffBase)
	}
	if c.BackoffMax < c.BackoffBase {
		bad("BackoffMax %s is less than BackoffBase %s", c.BackoffMax, c.BackoffBase)
	}
	if err := validateConsistency(c.Consistency); err != nil {
		bad("Consistency %q is neither %q nor %q", c.Consistency, ConsistencyStrong, ConsistencyStale)
	}
	return errors.Join(errs...)
}

// normalizeEndpoint checks a base URL and returns it without a trailing slash.
func normalizeEndpoint(e string) (string, error) {
	u, err := url.Parse(e)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("%q: scheme must be http or https", e)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", e)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%q: a base URL has no user info, query or fragment", e)
	}
	return strings.TrimRight(e, "/"), nil
}

func validateConsistency(c string) error {
	if c != ConsistencyStrong && c != ConsistencyStale {
		return fmt.Errorf("%w: consistency %q is neither %q nor %q", ErrInvalidArgument, c,
			ConsistencyStrong, ConsistencyStale)
	}
	return nil
}

// Credentials are a client's credentials as a command line takes them: a bearer token, or a
// file holding one (white space around it trimmed; TokenFile wins over Token), and the PEM files
// of https endpoints: CACert, the CA bundle to trust (empty: the system's), and ClientCert with
// ClientKey, a client certificate to authenticate with. The zero value sets nothing.
type Credentials struct {
	Token, TokenFile              string
	CACert, ClientCert, ClientKey string
}

// Apply sets cfg.Token and, when any TLS file is named, cfg.TLS from c. It reads the files.
// Errors: the token file cannot be read (wrapped, naming --token-file), or the TLS files do not
// load (security.ClientTLS).
func (c Credentials) Apply(cfg *Config) error {
	cfg.Token = c.Token
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		cfg.Token = strings.TrimSpace(string(b))
	}
	if c.CACert != "" || c.ClientCert != "" || c.ClientKey != "" {
		tc, err := security.ClientTLS(c.CACert, c.ClientCert, c.ClientKey)
		if err != nil {
			return err
		}
		cfg.TLS = tc
	}
	return nil
}
