package cells

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The checks of a body's JSON text that encoding/json does not make: it stores invalid UTF-8 and
// a lone surrogate escape ("\ud800") as U+FFFD, and keeps the last value of a key given twice in
// one object. Either would store another value than the client sent, and make two different
// texts one body (a retry of the other answers exists).

// checkUTF8 returns ErrLossyBody with the offset of the first byte that is not valid UTF-8.
func checkUTF8(text []byte) error {
	if utf8.Valid(text) {
		return nil
	}
	off := 0
	for off < len(text) {
		r, size := utf8.DecodeRune(text[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	return fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrLossyBody, off)
}

// scanText reads text, one JSON value that encoding/json decoded (so its syntax is valid), in one
// pass: it returns the number of object members it holds (its ':' outside strings), or
// ErrLossyBody at the first \u escape of half a UTF-16 surrogate pair that is not in a pair.
// The caller compares the count with the members of the decoded objects: fewer decoded means a
// key given twice in one object (duplicateKey then says which).
func scanText(text []byte) (members int, err error) {
	for i := 0; i < len(text); {
		switch text[i] {
		case ':':
			members++
			i++
		case '"':
			i++
			// q is the next quote: the closing one unless an escape (\") holds it. Each byte of
			// the string is searched once, however many escapes it has.
			q := i + bytes.IndexByte(text[i:], '"') // found: the syntax is valid
			for {
				e := bytes.IndexByte(text[i:q], '\\')
				if e < 0 {
					i = q + 1 // after the closing quote
					break
				}
				i += e // at a backslash: an escape
				if text[i+1] != 'u' {
					i += 2
				} else if r := hex4(text[i+2 : i+6]); r >= 0xd800 && r < 0xdc00 {
					if !lowSurrogateAt(text, i+6) {
						return 0, fmt.Errorf("%w: %s at byte %d is a high surrogate not followed by a low one (half of a UTF-16 pair, no character)",
							ErrLossyBody, text[i:i+6], i)
					}
					i += 12
				} else if r >= 0xdc00 && r < 0xe000 {
					return 0, fmt.Errorf("%w: %s at byte %d is a low surrogate without a high one before it (half of a UTF-16 pair, no character)",
						ErrLossyBody, text[i:i+6], i)
				} else {
					i += 6
				}
				if i > q { // the escape was \" and held q
					q = i + bytes.IndexByte(text[i:], '"')
				}
			}
		default:
			i++
		}
	}
	return members, nil
}

// lowSurrogateAt reports whether text holds, at byte i, the escape of a low surrogate
// (\udc00 to \udfff).
func lowSurrogateAt(text []byte, i int) bool {
	if i+6 > len(text) || text[i] != '\\' || text[i+1] != 'u' {
		return false
	}
	r := hex4(text[i+2 : i+6])
	return r >= 0xdc00 && r < 0xe000
}

// hex4 returns the value of four hexadecimal digits (already validated by the decoder).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// duplicateKey returns ErrLossyBody naming the first key that text, one valid JSON value without
// lone surrogates, gives twice in one object, with the byte offset of its second occurrence; nil
// if there is none. Keys are compared decoded: "a" and "\u0061" are the same key.
func duplicateKey(text []byte) error {
	var objects []map[string]bool // the enclosing objects and arrays (nil), innermost last
	for i := 0; i < len(text); {
		switch text[i] {
		case '{':
			objects = append(objects, map[string]bool{})
		case '[':
			objects = append(objects, nil)
		case '}', ']':
			objects = objects[:len(objects)-1]
		case '"':
			end := i + 1
			for text[end] != '"' {
				if text[end] == '\\' {
					end++ // the escaped byte; \u's digits hold no quote or backslash
				}
				end++
			}
			end++
			next := end
			for next < len(text) && (text[next] == ' ' || text[next] == '\t' || text[next] == '\n' || text[next] == '\r') {
				next++
			}
			if next < len(text) && text[next] == ':' {
				var key string
				if err := json.Unmarshal(text[i:end], &key); err != nil {
					return fmt.Errorf("cells: key at byte %d: %w", i, err)
				}
				seen := objects[len(objects)-1]
				if seen[key] {
					return fmt.Errorf("%w: key %q at byte %d is given twice in one object (only its last value would be kept)",
						ErrLossyBody, key, i)
				}
				seen[key] = true
			}
			i = end
			continue
		}
		i++
	}
	return nil
}
