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
	if sampleErr != nil {
		t.Fatalf("read sample: %v", sampleErr)
	}
	return sampleBytes
}

// openSample returns a Reader of the sample.
func openSample(t testing.TB) *Reader {
	t.Helper()
	r, err := NewReader(bytes.NewReader(readSample(t)))
	if err != nil {
		t.Fatalf("NewReader(sample) = %v", err)
	}
	return r
}

// loadSampleAirports returns LoadAirports of testdata/airports.csv.
func loadSampleAirports(t testing.TB) Airports {
	t.Helper()
	f, err := os.Open(airportsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a, err := LoadAirports(f)
	if err != nil {
		t.Fatalf("LoadAirports(%s) = %v", airportsPath, err)
	}
	return a
}

// rawSample reads the sample without the package: compress/gzip and encoding/csv with default
// settings. It returns the header and the data records.
func rawSample(t testing.TB) (header []string, records [][]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	if err != nil {
		t.Fatal(err)
	}
	all, err := csv.NewReader(zr).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return all[0], all[1:]
}

// rawAirports reads airports.csv without the package, keyed by its first column.
func rawAirports(t testing.TB) map[string][]string {
	t.Helper()
	f, err := os.Open(airportsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string][]string, len(all))
	for _, rec := range all[1:] {
		m[rec[0]] = rec
	}
	return m
}

// The sample files are the ones the README describes, byte for byte.
func TestTestdataChecksums(t *testing.T) {
	f, err := os.Open(readmePath)
	if err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Errorf("%s: %v", m[2], err)
			continue
		}
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != m[1] {
			t.Errorf("sha256 of %s: got %s, want %s (as in testdata/README.md)", m[2], got, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if found != 2 {
		t.Errorf("checksum lines in testdata/README.md: got %d, want 2", found)
	}
}

// countLines counts the '\n' of the decompressed sample, without csv.
func countLines(t testing.TB) int {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte{'\n'})
}
