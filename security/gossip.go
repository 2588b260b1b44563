package security

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
)

// NewGossipKey returns a new 32-byte gossip key, base64 encoded as a gossip key file holds it.
func NewGossipKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on Linux
	return base64.StdEncoding.EncodeToString(b)
}

// LoadGossipKeys reads a gossip keyring file: one base64 key of 16, 24 or 32 bytes (AES-128,
// -192 or -256) per line, the first being the key gossip encrypts with and every key being
// accepted, so a key is rotated by adding the new key second on every node, then moving it
// first, then removing the old one. Blank lines and lines starting with '#' are skipped.
func LoadGossipKeys(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("security: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("security: %s line %d: not base64: %w", path, i+1, err)
		}
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("security: %s line %d: a key of %d bytes; want 16, 24 or 32", path, i+1, n)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("security: %s holds no key", path)
	}
	return keys, nil
}

// WriteGossipKeyFile creates the gossip keyring file path (mode 0600) holding one new key
// (NewGossipKey). It refuses a file that exists: replacing a key is a rotation (see
// LoadGossipKeys).
func WriteGossipKeyFile(path string) error {
	return writeFileExcl(path, []byte(NewGossipKey()+"\n"), 0o600)
}
