package workload

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchSample runs each over every flight of the sample per iteration and reports flights/s.
func benchSample(b *testing.B, each func(Flight) error) {
	data := readSample(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		r, err := NewReader(bytes.NewReader(data))
		require.NoError(b, err, "NewReader(sample)")
		for {
			f, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(b, err, "Next")
			require.NoError(b, each(f), "flight of line %d", f.Line)
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "flights/s")
}

// Gunzip, parse and validate only.
func BenchmarkReadSample(b *testing.B) {
	benchSample(b, func(Flight) error { return nil })
}

// Read and build the stored BASE cell (row key, MessagePack, zlib).
func BenchmarkReadEncodeSample(b *testing.B) {
	a := loadSampleAirports(b)
	benchSample(b, func(f Flight) error { _, err := f.BaseCell(a); return err })
}

// Read and build the trip as the HTTP client sends it (row key, JSON text), through Import.
func BenchmarkImportSample(b *testing.B) {
	a := loadSampleAirports(b)
	data := readSample(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		r, err := NewReader(bytes.NewReader(data))
		require.NoError(b, err, "NewReader(sample)")
		got, err := Import(context.Background(), r, a, 1000, 0, func(context.Context, []Trip) error { return nil }, nil)
		require.NoError(b, err, "Import")
		n += got
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "flights/s")
}
