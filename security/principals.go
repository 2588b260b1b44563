package security

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Errors of Authenticate and LoadAuthenticator.
var (
	// ErrNoCredentials: the request carries neither a bearer token nor a client certificate
	// (401).
	ErrNoCredentials = errors.New("security: no credentials")
	// ErrBadCredentials: the token is not in the principals file, the Authorization header is
	// not "Bearer <token>", or the client certificate's name is not a certificate principal
	// (401).
	ErrBadCredentials = errors.New("security: credentials not recognized")
	// ErrBadPrincipals: the principals file does not parse or breaks a rule (the message says
	// which entry and field).
	ErrBadPrincipals = errors.New("security: bad principals file")
)

// TokenPrefix starts every token NewToken makes, so that a leaked token is easy to search for.
const TokenPrefix = "slt_"

// PrincipalsFile is the YAML layout of the principals file:
//
//	principals:
//	  - name: app              # 1-64 of [A-Za-z0-9._-], unique
//	    token_sha256: 5e88...  # hex SHA-256 of the bearer token (schemaless certs create-token)
//	    roles: [write]         # read, write, admin, metrics
//	    datastores: [trips]    # optional: the only datastores read and write apply to
//	  - name: reporting
//	    certificate: true      # a client certificate with CommonName "reporting" authenticates
//	    roles: [read]
type PrincipalsFile struct {
	Principals []PrincipalEntry `yaml:"principals"`
}

// PrincipalEntry is one principal of a PrincipalsFile.
type PrincipalEntry struct {
	Name        string   `yaml:"name"`
	TokenSHA256 string   `yaml:"token_sha256,omitempty"`
	Certificate bool     `yaml:"certificate,omitempty"`
	Roles       []string `yaml:"roles"`
	Datastores  []string `yaml:"datastores,omitempty"`
}

// NewToken returns a new random bearer token (TokenPrefix and 256 random bits, base64url) and
// the hex SHA-256 the principals file stores.
func NewToken() (token, digest string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on Linux
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, HashToken(token)
}

// HashToken returns the hex SHA-256 of token, as the principals file stores it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// ParsePrincipals decodes and checks a principals file: unique valid names, known roles, a
// 64-hex-digit digest, and each entry with a token, a certificate or both. Errors wrap
// ErrBadPrincipals and name the entry and field.
func ParsePrincipals(data []byte) (PrincipalsFile, error) {
	var f PrincipalsFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, fmt.Errorf("%w: %w", ErrBadPrincipals, err)
	}
	var errs []error
	seen := map[string]bool{}
	digests := map[string]bool{}
	for i, e := range f.Principals {
		bad := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("%w: principals[%d] (%q).%s: %s", ErrBadPrincipals, i, e.Name, field, fmt.Sprintf(format, args...)))
		}
		if err := checkName(e.Name); err != nil {
			bad("name", "%v", err)
		}
		if seen[e.Name] {
			bad("name", "appears twice")
		}
		seen[e.Name] = true
		if e.TokenSHA256 == "" && !e.Certificate {
			bad("token_sha256", "a principal needs a token digest, certificate: true, or both")
		}
		if e.TokenSHA256 != "" {
			if b, err := hex.DecodeString(e.TokenSHA256); err != nil || len(b) != sha256.Size {
				bad("token_sha256", "want 64 hex digits (the SHA-256 of the token, not the token)")
			} else if digests[strings.ToLower(e.TokenSHA256)] {
				bad("token_sha256", "the same token as another principal")
			}
			digests[strings.ToLower(e.TokenSHA256)] = true
		}
		if len(e.Roles) == 0 {
			bad("roles", "at least one role is required")
		}
		for _, r := range e.Roles {
			if _, err := ParseRole(r); err != nil {
				bad("roles", "%v", err)
			}
		}
		for _, ds := range e.Datastores {
			if ds == "" {
				bad("datastores", "empty name")
			}
		}
	}
	return f, errors.Join(errs...)
}

// Marshal encodes f as YAML.
func (f PrincipalsFile) Marshal() ([]byte, error) { return yaml.Marshal(f) }

// principals is one load of the file, indexed.
type principals struct {
	byDigest map[[sha256.Size]byte]*Principal
	byCert   map[string]*Principal
}

func indexPrincipals(f PrincipalsFile) principals {
	ps := principals{byDigest: map[[sha256.Size]byte]*Principal{}, byCert: map[string]*Principal{}}
	for _, e := range f.Principals {
		roles := make([]Role, len(e.Roles))
		for i, r := range e.Roles {
			roles[i] = Role(r)
		}
		p := &Principal{Name: e.Name, Roles: roles, Datastores: e.Datastores}
		if e.TokenSHA256 != "" {
			var d [sha256.Size]byte
			_, _ = hex.Decode(d[:], []byte(strings.ToLower(e.TokenSHA256)))
			tp := *p
			tp.Method = "token"
			ps.byDigest[d] = &tp
		}
		if e.Certificate {
			cp := *p
			cp.Method = "certificate"
			ps.byCert[e.Name] = &cp
		}
	}
	return ps
}

// Authenticator recognizes the principals of a principals file, re-read by Reload (and
// Watch). Safe for concurrent use.
type Authenticator struct {
	path string
	log  *slog.Logger

	mu    sync.RWMutex
	ps    principals
	stamp string
}

// LoadAuthenticator reads the principals file at path. logger receives reloads (nil:
// slog.Default()). Errors: the file's read error, or ErrBadPrincipals.
func LoadAuthenticator(path string, logger *slog.Logger) (*Authenticator, error) {
	if logger == nil {
		logger = slog.Default()
	}
	a := &Authenticator{path: path, log: logger.With("component", "auth")}
	if _, err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Path returns the principals file's path.
func (a *Authenticator) Path() string { return a.path }

// Reload re-reads the file if its contents changed, and reports whether it
// did. On error the previous principals stay in force.
func (a *Authenticator) Reload() (bool, error) {
	stamp, err := fileStamp(a.path)
	if err != nil {
		return false, err
	}
	a.mu.RLock()
	same := stamp == a.stamp
	a.mu.RUnlock()
	if same {
		return false, nil
	}
	data, err := os.ReadFile(a.path)
	if err != nil {
		return false, fmt.Errorf("security: %w", err)
	}
	f, err := ParsePrincipals(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", a.path, err)
	}
	ps := indexPrincipals(f)
	a.mu.Lock()
	a.ps, a.stamp = ps, stamp
	a.mu.Unlock()
	return true, nil
}

// Watch starts a goroutine that calls Reload every interval until ctx is done, logging what it
// loads and what it fails to load. It returns at once.
func (a *Authenticator) Watch(ctx context.Context, interval time.Duration) {
	go watch(ctx, interval, func() {
		switch changed, err := a.Reload(); {
		case err != nil:
			a.log.Error("principals file not reloaded; the previous principals stay in force", "error", err)
		case changed:
			a.log.Info("principals file reloaded", "path", a.path)
		}
	})
}

// Authenticate returns the principal r authenticates as: by its bearer token (Authorization:
// Bearer <token>) when it sends one, else by its verified client certificate (r.TLS's verified
// chain, a schemaless://client/ certificate whose CommonName is a certificate principal).
// Errors: ErrNoCredentials, ErrBadCredentials (wrapped with the reason; the token itself is
// never in the message).
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	a.mu.RLock()
	ps := a.ps
	a.mu.RUnlock()
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return nil, fmt.Errorf("%w: the Authorization header must be \"Bearer <token>\"", ErrBadCredentials)
		}
		d := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if p, ok := ps.byDigest[d]; ok {
			return p, nil
		}
		// The lookup is by digest, so its timing tells nothing about the token.
		return nil, fmt.Errorf("%w: unknown token", ErrBadCredentials)
	}
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		leaf := r.TLS.VerifiedChains[0][0]
		if !hasURIPrefix(leaf, clientURIPrefix) {
			return nil, fmt.Errorf("%w: certificate %q is not a client certificate", ErrBadCredentials, leaf.Subject.CommonName)
		}
		if p, ok := ps.byCert[leaf.Subject.CommonName]; ok {
			return p, nil
		}
		return nil, fmt.Errorf("%w: certificate %q is not a certificate principal", ErrBadCredentials, leaf.Subject.CommonName)
	}
	return nil, ErrNoCredentials
}

// AddPrincipal appends e to the principals file at path (created, mode 0600, if missing). The
// result is checked as a node reads it (ParsePrincipals: a duplicate name or a bad field fails
// with ErrBadPrincipals and leaves the file as it was) and replaces the file atomically (a
// temporary file renamed over it), so a node reloading it never reads half of it.
func AddPrincipal(path string, e PrincipalEntry) error {
	var pf PrincipalsFile
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("security: %w", err)
	default:
		if pf, err = ParsePrincipals(raw); err != nil {
			return err
		}
	}
	pf.Principals = append(pf.Principals, e)
	data, err := pf.Marshal()
	if err != nil {
		return err
	}
	if _, err := ParsePrincipals(data); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("security: %w", err)
	}
	return nil
}
