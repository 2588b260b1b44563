package cells

import (
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodedFlag makes the body benchmarks take the decoding paths (encoding/json and msgpack into
// Go values: the code before the direct transcoders), so one test binary measures both, A/B.
var decodedFlag = flag.Bool("decoded", false, "body benchmarks take the decoding paths instead of the direct transcoders")

// benchText is a trip body of about 256 bytes, as the benchmarks write.
const benchText = `{"origin":"SFO","destination":"JFK","distance":2586,"delay":17,"carrier":"UA","flight":1523,"date":"2026-11-25","fare":412.5,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`

// encodeBodyDecoded is EncodeBody by its decoding path only.
func encodeBodyDecoded(text []byte) (Body, error) {
	p, err := packTextDecoded(text)
	if err != nil {
		return nil, err
	}
	return compress(p), nil
}

// jsonOfDecoded is Body.JSON by its decoding path only.
func jsonOfDecoded(b Body) ([]byte, error) {
	p, err := b.Packed()
	if err != nil {
		return nil, err
	}
	if err := checkPacked(p); err != nil {
		return nil, err
	}
	return jsonDecoded(p)
}

// BenchmarkEncodeBody measures the JSON text of a request to the stored form (-decoded: by the
// decoding path).
func BenchmarkEncodeBody(b *testing.B) {
	encode := EncodeBody
	if *decodedFlag {
		encode = encodeBodyDecoded
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encode([]byte(benchText)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBodyJSON measures the stored form back to JSON text, as a read answers it (-decoded:
// by the decoding path).
func BenchmarkBodyJSON(b *testing.B) {
	body, err := EncodeBody([]byte(benchText))
	require.NoError(b, err)
	toJSON := Body.JSON
	if *decodedFlag {
		toJSON = jsonOfDecoded
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := toJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackText measures the JSON text to MessagePack alone, without zlib (-decoded: by the
// decoding path).
func BenchmarkPackText(b *testing.B) {
	text := []byte(benchText)
	b.ReportAllocs()
	for b.Loop() {
		if *decodedFlag {
			if _, err := packTextDecoded(text); err != nil {
				b.Fatal(err)
			}
		} else if _, ok := packText(text); !ok {
			b.Fatal("direct path refused the body")
		}
	}
}

// BenchmarkPackedJSON measures MessagePack to JSON text alone, after zlib and checkPacked
// (-decoded: by the decoding path).
func BenchmarkPackedJSON(b *testing.B) {
	body, err := EncodeBody([]byte(benchText))
	require.NoError(b, err)
	p, err := body.Packed()
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if *decodedFlag {
			if _, err := jsonDecoded(p); err != nil {
				b.Fatal(err)
			}
		} else if _, ok := jsonDirect(p); !ok {
			b.Fatal("direct path refused the body")
		}
	}
}

// BenchmarkBodyTextChecks measures the checks EncodeBody's decoding path makes beyond decoding
// (UTF-8, surrogate escapes, the count of object members), on the same body.
func BenchmarkBodyTextChecks(b *testing.B) {
	text := []byte(benchText)
	b.ReportAllocs()
	for b.Loop() {
		if err := checkUTF8(text); err != nil {
			b.Fatal(err)
		}
		if _, err := scanText(text); err != nil {
			b.Fatal(err)
		}
	}
}
