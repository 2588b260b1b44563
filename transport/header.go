package transport

import (
	"errors"
	"fmt"
	"io"
)

// Connection header; see the package documentation.
const (
	// headerMagic is the first byte of every connection: 'S' for schemaless, protocol version 1.
	// A new header layout gets a new byte.
	headerMagic byte = 'S'
	// kindRaft: one partition's raft traffic; a length-prefixed partition name follows.
	kindRaft byte = 'R'
	// kindRPC: node-to-node HTTP/1.1.
	kindRPC byte = 'H'
)

// MaxNameBytes is the longest partition name a connection header carries (its length is one
// byte).
const MaxNameBytes = 255

// errBadHeader marks a connection whose header is not ours (logged, never returned to callers).
var errBadHeader = errors.New("transport: bad connection header")

// ValidateName reports whether name can identify a partition on the wire: 1 to MaxNameBytes
// bytes of ASCII letters, digits and "._-/:" (for example "trips/3"). It returns an error
// wrapping ErrInvalidName, or nil.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return fmt.Errorf("%w: %d bytes, want 1 to %d", ErrInvalidName, len(name), MaxNameBytes)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w: %q has byte %#x at %d", ErrInvalidName, name, name[i], i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '.', c == '_', c == '-', c == '/', c == ':':
		return true
	}
	return false
}

// raftHeader returns the header of a raft connection for partition name (already validated).
func raftHeader(name string) []byte {
	h := make([]byte, 0, 3+len(name))
	h = append(h, headerMagic, kindRaft, byte(len(name)))
	return append(h, name...)
}

// rpcHeader returns the header of an RPC connection.
func rpcHeader() []byte { return []byte{headerMagic, kindRPC} }

// readHeader reads exactly one header from r and not a byte more (what follows belongs to the
// consumer). It returns the kind and, for raft, the partition name. A header that is not ours
// gives an error wrapping errBadHeader; a short read gives the read error (io.EOF,
// io.ErrUnexpectedEOF, a timeout).
func readHeader(r io.Reader) (kind byte, name string, err error) {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, "", err
	}
	if b[0] != headerMagic {
		return 0, "", fmt.Errorf("%w: magic %#x, want %#x", errBadHeader, b[0], headerMagic)
	}
	switch b[1] {
	case kindRPC:
		return kindRPC, "", nil
	case kindRaft:
	default:
		return 0, "", fmt.Errorf("%w: kind %#x", errBadHeader, b[1])
	}
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return 0, "", err
	}
	n := int(b[0])
	if n == 0 {
		return 0, "", fmt.Errorf("%w: empty partition name", errBadHeader)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, "", err
	}
	name = string(buf)
	if err := ValidateName(name); err != nil {
		return 0, "", fmt.Errorf("%w: %w", errBadHeader, err)
	}
	return kindRaft, name, nil
}
