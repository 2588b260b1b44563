package cells

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errPackedShape is returned for packed bytes that are not one well-formed MessagePack value.
var errPackedShape = errors.New("cells: body is not one MessagePack value")

// checkPacked checks, without allocating, that p holds exactly one well-formed MessagePack value
// whose arrays and maps declare no more elements than bytes remain to hold them. The decoder
// (msgpack v5) allocates an array's declared length up front: a corrupt or forged body of a few
// bytes declaring 2^32-1 elements would otherwise ask for 64 GiB and kill the process.
func checkPacked(p []byte) error {
	pending := 1 // values still to read
	i := 0
	for pending > 0 {
		if i >= len(p) {
			return fmt.Errorf("%w: truncated", errPackedShape)
		}
		c := p[i]
		i++
		pending--
		var n, skip int // elements declared; bytes of payload to skip
		var err error
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3: // fixint, nil, bool
		case c >= 0x80 && c <= 0x8f: // fixmap
			n = 2 * int(c&0x0f)
		case c >= 0x90 && c <= 0x9f: // fixarray
			n = int(c & 0x0f)
		case c >= 0xa0 && c <= 0xbf: // fixstr
			skip = int(c & 0x1f)
		case c == 0xc4 || c == 0xd9: // bin8, str8
			skip, i, err = length(p, i, 1)
		case c == 0xc5 || c == 0xda: // bin16, str16
			skip, i, err = length(p, i, 2)
		case c == 0xc6 || c == 0xdb: // bin32, str32
			skip, i, err = length(p, i, 4)
		case c == 0xc7: // ext8: length, type
			skip, i, err = length(p, i, 1)
			skip++
		case c == 0xc8: // ext16
			skip, i, err = length(p, i, 2)
			skip++
		case c == 0xc9: // ext32
			skip, i, err = length(p, i, 4)
			skip++
		case c == 0xca || c == 0xce || c == 0xd2: // float32, uint32, int32
			skip = 4
		case c == 0xcb || c == 0xcf || c == 0xd3: // float64, uint64, int64
			skip = 8
		case c == 0xcc || c == 0xd0: // uint8, int8
			skip = 1
		case c == 0xcd || c == 0xd1: // uint16, int16
			skip = 2
		case c >= 0xd4 && c <= 0xd8: // fixext 1, 2, 4, 8, 16: type and payload
			skip = 1 + 1<<(c-0xd4)
		case c == 0xdc: // array16
			n, i, err = length(p, i, 2)
		case c == 0xdd: // array32
			n, i, err = length(p, i, 4)
		case c == 0xde: // map16
			n, i, err = length(p, i, 2)
			n *= 2
		case c == 0xdf: // map32
			n, i, err = length(p, i, 4)
			n *= 2
		default: // 0xc1, never used
			return fmt.Errorf("%w: code %#x at byte %d", errPackedShape, c, i-1)
		}
		if err != nil {
			return err
		}
		if skip > len(p)-i {
			return fmt.Errorf("%w: truncated", errPackedShape)
		}
		i += skip
		// Every value takes at least one byte.
		if pending += n; pending > len(p)-i {
			return fmt.Errorf("%w: %d values declared, %d bytes left", errPackedShape, pending, len(p)-i)
		}
	}
	if i != len(p) {
		return fmt.Errorf("%w: %d bytes after the value", errPackedShape, len(p)-i)
	}
	return nil
}

// length reads the size bytes (1, 2 or 4, big endian) of a length at p[i:] and returns it and
// the index after it.
func length(p []byte, i, size int) (int, int, error) {
	if size > len(p)-i {
		return 0, i, fmt.Errorf("%w: truncated", errPackedShape)
	}
	switch size {
	case 1:
		return int(p[i]), i + 1, nil
	case 2:
		return int(binary.BigEndian.Uint16(p[i:])), i + 2, nil
	default:
		return int(binary.BigEndian.Uint32(p[i:])), i + 4, nil
	}
}
