package transport

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ok   bool
	}{
		{"trips/3", true},
		{"a", true},
		{"Trips_v2.idx-1:7", true},
		{strings.Repeat("x", MaxNameBytes), true},
		{"", false},
		{strings.Repeat("x", MaxNameBytes+1), false},
		{"trips 3", false},
		{"trips\n3", false},
		{"trïps", false},
		{"a\x00", false},
	}
	for _, tt := range tests {
		err := ValidateName(tt.name)
		if tt.ok {
			assert.NoError(t, err, "ValidateName(%q)", tt.name)
		} else {
			assert.ErrorIs(t, err, ErrInvalidName, "ValidateName(%q)", tt.name)
		}
	}
}

func TestReadHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	// What follows the header must stay unread: it is the consumer's first bytes.
	const payload = "payload"
	for _, name := range []string{"trips/3", strings.Repeat("p", MaxNameBytes)} {
		r := bytes.NewReader(append(raftHeader(name), payload...))
		kind, got, err := readHeader(r)
		require.NoError(t, err, "readHeader(raft %q)", name)
		require.Equal(t, kindRaft, kind, "readHeader(raft %q): kind", name)
		require.Equal(t, name, got, "readHeader(raft %q): name", name)
		rest, _ := io.ReadAll(r)
		assert.Equal(t, payload, string(rest), "after the raft header: bytes left")
	}
	r := bytes.NewReader(append(rpcHeader(), payload...))
	kind, name, err := readHeader(r)
	require.NoError(t, err, "readHeader(rpc)")
	require.Equal(t, kindRPC, kind, "readHeader(rpc): kind")
	require.Empty(t, name, "readHeader(rpc): name")
	rest, _ := io.ReadAll(r)
	assert.Equal(t, payload, string(rest), "after the rpc header: bytes left")
}

func TestReadHeaderRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		in      []byte
		wantErr error
	}{
		{"empty", nil, io.EOF},
		{"one byte", []byte{headerMagic}, io.ErrUnexpectedEOF},
		{"http request", []byte("GET / HTTP/1.1\r\n\r\n"), errBadHeader},
		{"wrong magic", []byte{'T', kindRPC}, errBadHeader},
		{"unknown kind", []byte{headerMagic, 'X'}, errBadHeader},
		{"raft without length", []byte{headerMagic, kindRaft}, io.EOF},
		{"empty name", []byte{headerMagic, kindRaft, 0, 'a'}, errBadHeader},
		{"short name", []byte{headerMagic, kindRaft, 5, 'a', 'b'}, io.ErrUnexpectedEOF},
		{"bad name byte", []byte{headerMagic, kindRaft, 3, 'a', ' ', 'b'}, errBadHeader},
	}
	for _, tt := range tests {
		_, _, err := readHeader(bytes.NewReader(tt.in))
		assert.ErrorIs(t, err, tt.wantErr, "%s: readHeader(%q)", tt.desc, tt.in)
	}
}
