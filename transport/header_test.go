package transport

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
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
		if got := err == nil; got != tt.ok {
			t.Errorf("ValidateName(%q) = %v: got ok=%v, want ok=%v", tt.name, err, got, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateName(%q) = %v: got an error that is not ErrInvalidName", tt.name, err)
		}
	}
}

func TestReadHeaderRoundTrip(t *testing.T) {
	// What follows the header must stay unread: it is the consumer's first bytes.
	const payload = "payload"
	for _, name := range []string{"trips/3", strings.Repeat("p", MaxNameBytes)} {
		r := bytes.NewReader(append(raftHeader(name), payload...))
		kind, got, err := readHeader(r)
		if err != nil || kind != kindRaft || got != name {
			t.Fatalf("readHeader(raft %q): got (%q, %q, %v), want (%q, %q, nil)", name, kind, got, err, kindRaft, name)
		}
		if rest, _ := io.ReadAll(r); string(rest) != payload {
			t.Errorf("after the raft header: got %q left, want %q", rest, payload)
		}
	}
	r := bytes.NewReader(append(rpcHeader(), payload...))
	kind, name, err := readHeader(r)
	if err != nil || kind != kindRPC || name != "" {
		t.Fatalf("readHeader(rpc): got (%q, %q, %v), want (%q, \"\", nil)", kind, name, err, kindRPC)
	}
	if rest, _ := io.ReadAll(r); string(rest) != payload {
		t.Errorf("after the rpc header: got %q left, want %q", rest, payload)
	}
}

func TestReadHeaderRejects(t *testing.T) {
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
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: readHeader(%q): got error %v, want %v", tt.desc, tt.in, err, tt.wantErr)
		}
	}
}
