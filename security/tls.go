package security

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// TLSFiles names a node's PEM files: its certificate (with any intermediates after it), its
// private key, and the CA bundle it trusts for peers and client certificates.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

// Validate reports a missing file name.
func (f TLSFiles) Validate() error {
	var errs []error
	if f.CertFile == "" {
		errs = append(errs, errors.New("security: TLS certificate file (--tls-cert) is required"))
	}
	if f.KeyFile == "" {
		errs = append(errs, errors.New("security: TLS key file (--tls-key) is required"))
	}
	if f.CAFile == "" {
		errs = append(errs, errors.New("security: TLS CA file (--tls-ca) is required"))
	}
	return errors.Join(errs...)
}

// Certs holds a node's certificate, key and trusted CAs, re-read from their files by Reload
// (and Watch). The tls.Configs it returns read the current ones at every handshake, so a
// rotated certificate or CA bundle takes effect for new connections without a restart;
// established connections keep theirs. Safe for concurrent use.
type Certs struct {
	files TLSFiles
	log   *slog.Logger

	mu    sync.RWMutex
	cert  *tls.Certificate
	pool  *x509.CertPool
	stamp string // the digest of the files at the last load (fileStamp)
}

// LoadCerts reads files (all three required) and checks that the key matches the certificate
// and that the CA bundle verifies the certificate. logger receives reloads (nil:
// slog.Default()).
func LoadCerts(files TLSFiles, logger *slog.Logger) (*Certs, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	c := &Certs{files: files, log: logger.With("component", "tls")}
	if _, err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Files returns the files c reads.
func (c *Certs) Files() TLSFiles { return c.files }

// Reload re-reads the files if their contents changed since the last load,
// and reports whether it did. On error the previous certificate and CAs stay in force.
func (c *Certs) Reload() (bool, error) {
	stamp, err := fileStamp(c.files.CertFile, c.files.KeyFile, c.files.CAFile)
	if err != nil {
		return false, err
	}
	c.mu.RLock()
	same := stamp == c.stamp
	c.mu.RUnlock()
	if same {
		return false, nil
	}
	cert, err := tls.LoadX509KeyPair(c.files.CertFile, c.files.KeyFile)
	if err != nil {
		return false, fmt.Errorf("security: load %s, %s: %w", c.files.CertFile, c.files.KeyFile, err)
	}
	cas, err := readCertificates(c.files.CAFile)
	if err != nil {
		return false, err
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return false, fmt.Errorf("security: %s is not signed by a CA of %s: %w", c.files.CertFile, c.files.CAFile, err)
	}
	c.mu.Lock()
	c.cert, c.pool, c.stamp = &cert, pool, stamp
	c.mu.Unlock()
	return true, nil
}

// Watch starts a goroutine that calls Reload every interval until ctx is done, logging what it
// loads and what it fails to load. It returns at once.
func (c *Certs) Watch(ctx context.Context, interval time.Duration) {
	go watch(ctx, interval, func() {
		switch changed, err := c.Reload(); {
		case err != nil:
			c.log.Error("TLS files not reloaded; the previous ones stay in force", "error", err)
		case changed:
			c.log.Info("TLS files reloaded", "cert", c.files.CertFile, "ca", c.files.CAFile, "not_after", c.Leaf().NotAfter)
		}
	})
}

// Leaf returns the current certificate.
func (c *Certs) Leaf() *x509.Certificate {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert.Leaf
}

func (c *Certs) current() (*tls.Certificate, *x509.CertPool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert, c.pool
}

// ServerConfig returns the TLS configuration of the client API and the admin listener: the
// node's certificate, TLS 1.2 or later, HTTP/2 and HTTP/1.1, and client certificates verified
// against the CA bundle when a client presents one (VerifyClientCertIfGiven; the principals
// file decides what a certificate's name may do).
func (c *Certs) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := c.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2", "http/1.1"},
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   tls.VerifyClientCertIfGiven,
				ClientCAs:    pool,
			}, nil
		},
	}
}

// PeerServerConfig returns the TLS configuration of the node port (raft and node RPC): TLS
// 1.3, and a client certificate is required, verified against the current CA bundle, and must
// be a node certificate (ErrNotNode otherwise).
func (c *Certs) PeerServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAnyClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, _ := c.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := c.verifyPeer(cs, "", x509.ExtKeyUsageClientAuth)
			return err
		},
	}
}

// PeerClientConfig returns the TLS configuration a node dials its peers with: it presents the
// node's certificate and accepts a peer whose certificate the current CA bundle verifies for
// the dialed host and that is a node certificate. The caller must set ServerName to the dialed
// host on a copy (Clone) before each dial; a config without ServerName refuses every peer.
func (c *Certs) PeerClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Verified by VerifyConnection below against the CA bundle of the moment (RootCAs
		// cannot be swapped on a live config).
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := c.current()
			return cert, nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.ServerName == "" {
				return errors.New("security: peer dialed without a server name")
			}
			_, err := c.verifyPeer(cs, cs.ServerName, x509.ExtKeyUsageServerAuth)
			return err
		},
	}
}

// ClientConfig returns a TLS configuration for an in-process client of the API (the dev
// command, tests): it trusts the current CA bundle and presents no certificate.
func (c *Certs) ClientConfig() *tls.Config {
	_, pool := c.current()
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
}

// verifyPeer verifies a peer's chain against the current CAs for usage (and host, if not
// empty) and returns its node id.
func (c *Certs) verifyPeer(cs tls.ConnectionState, host string, usage x509.ExtKeyUsage) (string, error) {
	if len(cs.PeerCertificates) == 0 {
		return "", errors.New("security: peer presented no certificate")
	}
	_, pool := c.current()
	inter := x509.NewCertPool()
	for _, ic := range cs.PeerCertificates[1:] {
		inter.AddCert(ic)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: host, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return "", fmt.Errorf("security: peer certificate %q: %w", leaf.Subject.CommonName, err)
	}
	id, err := NodeID(leaf)
	if err != nil {
		return "", fmt.Errorf("%w: %q", err, leaf.Subject.CommonName)
	}
	return id, nil
}

// ClientTLS returns the TLS configuration of an API client: it trusts caFile's CAs (empty:
// the system's) and, when certFile and keyFile are given, presents that client certificate.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		cas, err := readCertificates(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		for _, ca := range cas {
			cfg.RootCAs.AddCert(ca)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("security: a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("security: load %s, %s: %w", certFile, keyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// fileStamp describes files by the SHA-256 of their contents (small files, read at every
// check: a rewrite within the file system's timestamp granularity is still seen).
func fileStamp(paths ...string) (string, error) {
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", fmt.Errorf("security: %w", err)
		}
		fmt.Fprintf(h, "%s:%d:", p, len(b))
		h.Write(b)
	}
	return string(h.Sum(nil)), nil
}

// watch calls f every interval until ctx is done.
func watch(ctx context.Context, interval time.Duration, f func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
