package security

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// DevPrincipals are the principals a development bundle gives a token each: name and roles.
var DevPrincipals = []struct {
	Name  string
	Roles []Role
}{
	{"admin", []Role{RoleAdmin}},
	{"app", []Role{RoleWrite}},
	{"reader", []Role{RoleRead}},
	{"prometheus", []Role{RoleMetrics}},
}

// DevBundle is the files of a development cluster's security (EnsureDevBundle).
type DevBundle struct {
	Dir string
	// CA is the CA certificate clients trust (curl --cacert).
	CA string
	// GossipKey is the gossip keyring file.
	GossipKey string
	// Principals is the principals file.
	Principals string
	// Tokens maps each DevPrincipals name to its token (also in Dir/token.<name>, mode 0600).
	Tokens map[string]string
}

// Node returns node id's TLS files in the bundle.
func (b *DevBundle) Node(id string) TLSFiles {
	return TLSFiles{CertFile: filepath.Join(b.Dir, "node."+id+".crt"), KeyFile: filepath.Join(b.Dir, "node."+id+".key"), CAFile: b.CA}
}

// EnsureDevBundle makes dir a development cluster's security bundle, keeping what it holds
// already: a CA (ca.crt, ca.key), a certificate for each node of hosts (node id -> its hosts,
// node.<id>.crt and .key; a node whose certificate exists keeps it), a gossip key, and a
// principals file with a token per DevPrincipals entry (token.<name>). Every key and token file
// is mode 0600. It is for development and tests: a production CA key does not live beside
// the nodes' files.
func EnsureDevBundle(dir string, hosts map[string][]string) (*DevBundle, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	b := &DevBundle{Dir: dir, CA: filepath.Join(dir, CAFile), GossipKey: filepath.Join(dir, GossipKeyFile),
		Principals: filepath.Join(dir, "principals.yaml"), Tokens: map[string]string{}}
	ca, err := LoadAuthority(dir)
	if errors.Is(err, fs.ErrNotExist) {
		ca, err = CreateAuthority(dir, "schemaless development CA", 10*365*24*time.Hour)
	}
	if err != nil {
		return nil, err
	}
	for id, hs := range hosts {
		f := b.Node(id)
		if _, err := os.Stat(f.CertFile); err == nil {
			continue
		}
		is, err := ca.IssueNode(id, hs, 365*24*time.Hour)
		if err != nil {
			return nil, err
		}
		if err := is.Save(f.CertFile, f.KeyFile); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(b.GossipKey); errors.Is(err, fs.ErrNotExist) {
		if err := WriteGossipKeyFile(b.GossipKey); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(b.Principals); errors.Is(err, fs.ErrNotExist) {
		var pf PrincipalsFile
		for _, p := range DevPrincipals {
			tok, digest := NewToken()
			roles := make([]string, len(p.Roles))
			for i, r := range p.Roles {
				roles[i] = string(r)
			}
			pf.Principals = append(pf.Principals, PrincipalEntry{Name: p.Name, TokenSHA256: digest, Roles: roles})
			if err := os.WriteFile(filepath.Join(dir, "token."+p.Name), []byte(tok+"\n"), 0o600); err != nil {
				return nil, fmt.Errorf("security: %w", err)
			}
		}
		data, err := pf.Marshal()
		if err != nil {
			return nil, err
		}
		if err := writeFileExcl(b.Principals, data, 0o600); err != nil {
			return nil, err
		}
	}
	for _, p := range DevPrincipals {
		raw, err := os.ReadFile(filepath.Join(dir, "token."+p.Name))
		if err != nil {
			return nil, fmt.Errorf("security: %w", err)
		}
		b.Tokens[p.Name] = string(bytes.TrimSpace(raw))
	}
	return b, nil
}
