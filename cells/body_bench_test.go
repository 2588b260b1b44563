package cells

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// benchText is a trip body of about 256 bytes, as the benchmarks write.
const benchText = `{"origin":"SFO","destination":"JFK","distance":2586,"delay":17,"carrier":"UA","flight":1523,"date":"2026-11-25","fare":412.5,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`

// BenchmarkEncodeBody measures the JSON text of a request to the stored form.
func BenchmarkEncodeBody(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeBody([]byte(benchText)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBodyJSON measures the stored form back to JSON text, as a read answers it.
func BenchmarkBodyJSON(b *testing.B) {
	body, err := EncodeBody([]byte(benchText))
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := body.JSON(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBodyTextChecks measures the checks EncodeBody makes beyond decoding (UTF-8, surrogate
// escapes, the count of object members), on the same body.
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
