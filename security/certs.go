package security

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names under a certificates directory (see CertsDir).
const (
	CAFile        = "ca.crt"
	CAKey         = "ca.key"
	GossipKeyFile = "gossip.key"
)

// URI SAN prefixes of the identities this package issues.
const (
	nodeURIPrefix   = "schemaless://node/"
	clientURIPrefix = "schemaless://client/"
)

// Errors of the certificate functions.
var (
	// ErrNotNode: a peer presented a certificate without a schemaless://node/ URI (a client
	// certificate, or one from another issuer).
	ErrNotNode = errors.New("security: not a node certificate")
	// ErrBadName: a node id or client name that cannot be carried in a certificate's URI.
	ErrBadName = errors.New("security: invalid name")
)

// Authority is a certificate authority: its certificate and signing key.
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewAuthority creates a self-signed CA named name, valid for validity from one hour ago (to
// absorb clock skew between machines).
func NewAuthority(name string, validity time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("security: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"schemaless"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("security: CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// CreateAuthority creates a CA named name, valid for validity (NewAuthority), and saves it in
// dir (Save), creating dir with mode 0700 if missing. It refuses a dir that holds a CA already.
func CreateAuthority(dir, name string, validity time.Duration) (*Authority, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	a, err := NewAuthority(name, validity)
	if err != nil {
		return nil, err
	}
	if err := a.Save(dir); err != nil {
		return nil, err
	}
	return a, nil
}

// LoadAuthority reads a CA's certificate and key from dir's ca.crt and ca.key.
func LoadAuthority(dir string) (*Authority, error) {
	certs, err := readCertificates(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(dir, CAKey))
	if err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	b, _ := pem.Decode(raw)
	if b == nil {
		return nil, fmt.Errorf("security: %s: no PEM block", filepath.Join(dir, CAKey))
	}
	key, err := x509.ParseECPrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("security: %s: %w", filepath.Join(dir, CAKey), err)
	}
	return &Authority{Cert: certs[0], Key: key}, nil
}

// Save writes the CA to dir as ca.crt (0644) and ca.key (0600), refusing to overwrite either.
func (a *Authority) Save(dir string) error {
	keyDER, err := x509.MarshalECPrivateKey(a.Key)
	if err != nil {
		return err
	}
	if err := writePEM(filepath.Join(dir, CAFile), "CERTIFICATE", a.Cert.Raw, 0o644); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, CAKey), "EC PRIVATE KEY", keyDER, 0o600)
}

// Issued is a certificate and its key, as PEM.
type Issued struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Save writes the certificate to certFile (0644) and the key to keyFile (0600), refusing to
// overwrite either.
func (i Issued) Save(certFile, keyFile string) error {
	if err := writeFileExcl(certFile, i.CertPEM, 0o644); err != nil {
		return err
	}
	return writeFileExcl(keyFile, i.KeyPEM, 0o600)
}

// IssueNode issues node id's certificate: server and client authentication, the URI SAN
// schemaless://node/<id>, and hosts (IP addresses and DNS names; "localhost" and 127.0.0.1 are
// not added unless listed). Errors: ErrBadName for an id that is not a valid URI path segment.
func (a *Authority) IssueNode(id string, hosts []string, validity time.Duration) (Issued, error) {
	if err := checkName(id); err != nil {
		return Issued{}, err
	}
	u, _ := url.Parse(nodeURIPrefix + id)
	tmpl := leafTemplate(id, validity, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	tmpl.URIs = []*url.URL{u}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return a.issue(tmpl)
}

// IssueClient issues a client certificate for name: client authentication only, CommonName
// name and URI SAN schemaless://client/<name>. Errors: ErrBadName.
func (a *Authority) IssueClient(name string, validity time.Duration) (Issued, error) {
	if err := checkName(name); err != nil {
		return Issued{}, err
	}
	u, _ := url.Parse(clientURIPrefix + name)
	tmpl := leafTemplate(name, validity, x509.ExtKeyUsageClientAuth)
	tmpl.URIs = []*url.URL{u}
	return a.issue(tmpl)
}

func leafTemplate(cn string, validity time.Duration, usage ...x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"schemaless"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
	}
}

func (a *Authority) issue(tmpl *x509.Certificate) (Issued, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Issued{}, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return Issued{}, fmt.Errorf("security: issue %q: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Issued{}, err
	}
	return Issued{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// NodeID returns the node id a certificate's schemaless://node/ URI names, or ErrNotNode.
func NodeID(cert *x509.Certificate) (string, error) {
	for _, u := range cert.URIs {
		if s := u.String(); strings.HasPrefix(s, nodeURIPrefix) && len(s) > len(nodeURIPrefix) {
			return s[len(nodeURIPrefix):], nil
		}
	}
	return "", ErrNotNode
}

// checkName accepts names of 1-64 letters, digits, '-', '_' and '.'.
func checkName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%w: %q: want 1 to 64 characters", ErrBadName, s)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%w: %q: want letters, digits, '-', '_' or '.'", ErrBadName, s)
		}
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return writeFileExcl(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

// writeFileExcl creates path with data, refusing an existing file.
func writeFileExcl(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("security: write %s: %w", path, err)
	}
	return f.Close()
}

// readCertificates reads every CERTIFICATE block of a PEM file (at least one).
func readCertificates(path string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("security: %s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("security: %s: no certificate", path)
	}
	return out, nil
}

// hasURIPrefix reports whether cert carries a URI SAN starting with prefix.
func hasURIPrefix(cert *x509.Certificate, prefix string) bool {
	for _, u := range cert.URIs {
		if strings.HasPrefix(u.String(), prefix) {
			return true
		}
	}
	return false
}
