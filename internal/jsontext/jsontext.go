package jsontext

import (
	"encoding/base64"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s as a JSON string to dst and returns the extended slice, as
// encoding/json's string encoder does with HTML escaping off: '"' and '\\' escaped with a
// backslash, \b \f \n \r \t by name, other bytes below 0x20 as \u00XX, U+2028 and U+2029 as
// \u2028 and \u2029 (JavaScript line terminators), each byte of invalid UTF-8 as \ufffd, and
// everything else as is. It never fails.
func AppendString(dst []byte, s string) []byte {
	return appendString(dst, s, utf8.DecodeRuneInString)
}

// AppendStringBytes is AppendString for text held in a byte slice (a MessagePack str read in
// place), without converting it to a string.
func AppendStringBytes(dst, s []byte) []byte { return appendString(dst, s, utf8.DecodeRune) }

func appendString[S string | []byte](dst []byte, s S, decode func(S) (rune, int)) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := decode(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendBytes appends b as encoding/json writes a []byte: a JSON string of its standard
// base64 encoding (padded), or null for a nil slice.
func AppendBytes(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// AppendTime appends t as time.Time's MarshalJSON writes it: a JSON string in RFC 3339 with
// nanoseconds as needed (time.RFC3339Nano). ok is false, and dst is returned unchanged, for a
// time MarshalJSON refuses (a year outside 0 to 9999, or a zone offset of a fraction of a
// minute or over 24 hours).
func AppendTime(dst []byte, t time.Time) (out []byte, ok bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, false
	}
	if _, off := t.Zone(); off%60 != 0 || off <= -24*3600 || off >= 24*3600 {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}
