package workload

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sample data of the repository (see testdata/README.md).
var (
	samplePath   = filepath.Join("..", "testdata", "flights-100k.csv.gz")
	airportsPath = filepath.Join("..", "testdata", "airports.csv")
	readmePath   = filepath.Join("..", "testdata", "README.md")
)

// sampleRows is the number of flights in the sample, as its README states.
const sampleRows = 100000

var (
	sampleOnce  sync.Once
	sampleBytes []byte
	sampleErr   error
)

// readSample returns the bytes of the gzipped sample, read once per test binary.
func readSample(t testing.TB) []byte {
	t.Helper()
	sampleOnce.Do(func() { sampleBytes, sampleErr = os.ReadFile(samplePath) })
	require.NoError(t, sampleErr, "read sample")
	return sampleBytes
}

// openSample returns a Reader of the sample.
func openSample(t testing.TB) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(readSample(t)))
	require.NoError(t, err, "NewReader(sample)")
	return r
}

// loadSampleAirports returns LoadAirports of testdata/airports.csv.
func loadSampleAirports(t testing.TB) Airports {
	t.Helper()
	f, err := os.Open(airportsPath)
	require.NoError(t, err)
	defer f.Close()
	a, err := LoadAirports(f)
	require.NoError(t, err, "LoadAirports(%s)", airportsPath)
	return a
}

// rawSample reads the sample without the package: compress/gzip and encoding/csv with default
// settings. It returns the header and the data records.
func rawSample(t testing.TB) (header []string, records [][]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	require.NoError(t, err, "gzip of the sample")
	all, err := csv.NewReader(zr).ReadAll()
	require.NoError(t, err, "csv of the sample")
	return all[0], all[1:]
}

// rawAirports reads airports.csv without the package, keyed by its first column.
func rawAirports(t testing.TB) map[string][]string {
	t.Helper()
	f, err := os.Open(airportsPath)
	require.NoError(t, err)
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err, "csv of %s", airportsPath)
	m := make(map[string][]string, len(all))
	for _, rec := range all[1:] {
		m[rec[0]] = rec
	}
	return m
}

// The sample files are the ones the README describes, byte for byte.
func TestTestdataChecksums(t *testing.T) {
	t.Parallel()
	f, err := os.Open(readmePath)
	require.NoError(t, err)
	defer f.Close()
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		found++
		data, err := os.ReadFile(filepath.Join("..", "testdata", m[2]))
		if !assert.NoError(t, err, m[2]) {
			continue
		}
		sum := sha256.Sum256(data)
		assert.Equal(t, m[1], hex.EncodeToString(sum[:]), "sha256 of %s: want the one in testdata/README.md", m[2])
	}
	require.NoError(t, sc.Err(), "reading %s", readmePath)
	assert.Equal(t, 2, found, "checksum lines in testdata/README.md")
}

// countLines counts the '\n' of the decompressed sample, without csv.
func countLines(t testing.TB) int {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	require.NoError(t, err, "gzip of the sample")
	data, err := io.ReadAll(zr)
	require.NoError(t, err, "gunzip the sample")
	return bytes.Count(data, []byte{'\n'})
}
