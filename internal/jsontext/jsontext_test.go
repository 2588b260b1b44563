package jsontext

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encode is what the API's writer produces for v: encoding/json with HTML escaping off, without
// the newline.
func encode(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// RandomString returns a string of up to 24 pieces drawn to hit every escaping rule: ASCII,
// control bytes, quotes and backslashes, HTML characters, U+2028 and U+2029, multi-byte runes,
// and invalid UTF-8 (stray continuation bytes, truncated sequences, surrogates encoded in UTF-8).
func randomString(r *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "~", "\"", "\\", "/", "<", ">", "&", "\x00", "\x01", "\x1f", "\b", "\f", "\n", "\r", "\t",
		"\x7f", "é", "日本", "\u2028", "\u2029", "😀", "\xff", "\x80", "\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\ufffd"}
	var b []byte
	for n := r.IntN(24); n > 0; n-- {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func TestAppendStringMatchesEncoder(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	for i := 0; i < 20000; i++ {
		s := randomString(r)
		want := string(encode(t, s))
		if !assert.Equal(t, want, string(AppendString(nil, s)), "%q", s) ||
			!assert.Equal(t, want, string(AppendStringBytes(nil, []byte(s))), "%q as bytes", s) {
			return
		}
	}
	// Every single byte, alone and after a valid prefix.
	for c := 0; c < 256; c++ {
		for _, s := range []string{string([]byte{byte(c)}), "ab" + string([]byte{byte(c)}) + "cd"} {
			assert.Equal(t, string(encode(t, s)), string(AppendString([]byte("x"), s)[1:]), "%q", s)
		}
	}
}

func TestAppendBytesMatchesEncoder(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {0}, {1, 2}, {0xff, 0xfe, 0xfd}, bytes.Repeat([]byte{7}, 100)} {
		assert.Equal(t, string(encode(t, b)), string(AppendBytes(nil, b)), "%v", b)
	}
}

func TestAppendTimeMatchesMarshalJSON(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("p", 5*3600+30*60), time.FixedZone("m", -8*3600),
		time.FixedZone("sec", 3600+7), time.FixedZone("big", 25*3600)}
	times := []time.Time{
		time.Date(2026, 11, 27, 17, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 27, 17, 0, 0, 123456000, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	}
	for _, tm := range times {
		for _, z := range zones {
			tz := tm.In(z)
			want, err := tz.MarshalJSON()
			got, ok := AppendTime([]byte("x"), tz)
			if err != nil {
				assert.False(t, ok, "%v: MarshalJSON refuses it (%v)", tz, err)
				assert.Equal(t, "x", string(got))
				continue
			}
			if ok {
				assert.Equal(t, string(want), string(got[1:]), "%v", tz)
			}
			if z == time.UTC {
				assert.True(t, ok, "%v", tz)
			}
		}
	}
}
