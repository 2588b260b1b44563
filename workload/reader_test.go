package workload

import (
	"bytes"
	"compress/gzip"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every flight of r, failing the test on any error but io.EOF.
//
// Loops over the 100,000 flights of the sample assert only when a plain check fails: a testify
// call per flight makes these tests ten times slower under -race.
func readAll(t testing.TB, r *Reader) []Flight {
	t.Helper()
	var out []Flight
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			require.NoError(t, err, "Next() after %d flights", len(out))
		}
		out = append(out, f)
	}
}

// flightFields renders f's columns as the file would write them.
func flightFields(f Flight) []string {
	return []string{f.Date, strconv.Itoa(f.Delay), strconv.Itoa(f.Distance), f.Origin, f.Destination}
}

func TestReadSample(t *testing.T) {
	t.Parallel()
	header, raw := rawSample(t)
	require.Equal(t, "date,delay,distance,origin,destination", strings.Join(header, ","), "sample header")
	require.Len(t, raw, sampleRows, "raw csv rows of the sample")
	flights := readAll(t, openSample(t))
	require.Len(t, flights, sampleRows, "flights read")
	// The sample has no blank or multi-line rows, so the last flight is on the last line.
	assert.Equal(t, countLines(t), flights[len(flights)-1].Line, "line of the last flight: want the newlines in the file")
	for _, c := range []struct {
		name string
		i    int
	}{{"first", 0}, {"last", len(raw) - 1}} {
		f := flights[c.i]
		assert.Equal(t, strings.Join(raw[c.i], ","), strings.Join(flightFields(f), ","), "%s flight", c.name)
		assert.Equal(t, c.i+2, f.Line, "%s flight line", c.name)
	}
	for i, f := range flights { // a plain check first: see readAll
		if strings.Join(flightFields(f), ",") != strings.Join(raw[i], ",") || f.Line != i+2 {
			require.Equal(t, raw[i], flightFields(f), "flight %d (line %d)", i, f.Line)
			require.Equal(t, i+2, f.Line, "flight %d: line", i)
		}
	}
	// Known values of the first row, as published (a guard against reading the wrong file).
	assert.Equal(t, Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"},
		flights[0], "first flight")
}

// Plain CSV and gzipped CSV read the same; so do CRLF line ends, a byte order mark and a reader
// that returns one byte at a time.
func TestReaderFormats(t *testing.T) {
	t.Parallel()
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	require.NoError(t, err, "gzip of the sample")
	plain, err := io.ReadAll(zr)
	require.NoError(t, err, "gunzip the sample")
	plain = plain[:bytes.Index(plain, []byte("\n2001-01-01T00:11:00"))+1] // a few hundred rows
	want := readAll(t, mustReader(t, bytes.NewReader(plain)))
	require.GreaterOrEqual(t, len(want), 10, "flights of the plain prefix")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	crlf := bytes.ReplaceAll(plain, []byte("\n"), []byte("\r\n"))
	bom := append([]byte("\ufeff"), plain...)
	for name, in := range map[string]io.Reader{
		"gzip":       bytes.NewReader(gz.Bytes()),
		"crlf":       bytes.NewReader(crlf),
		"bom":        bytes.NewReader(bom),
		"onebyte":    iotest.OneByteReader(bytes.NewReader(plain)),
		"onebyte-gz": iotest.OneByteReader(bytes.NewReader(gz.Bytes())),
	} {
		got := readAll(t, mustReader(t, in))
		if !assert.Len(t, got, len(want), "%s: flights", name) {
			continue
		}
		for i := range got {
			if !assert.Equal(t, want[i], got[i], "%s: flight %d", name, i) {
				break
			}
		}
	}
}

func mustReader(t testing.TB, r io.Reader) *Reader {
	t.Helper()
	fr, err := NewReader(r)
	require.NoError(t, err, "NewReader")
	return fr
}

const header = "date,delay,distance,origin,destination\n"

// A blank line is skipped, and line numbers still count it.
func TestReaderLineNumbers(t *testing.T) {
	t.Parallel()
	in := header + "2001-01-01T00:01:00,1,2,LAS,PHL\n\n2001-01-01T00:02:00,-3,4,ATL,SAV\n"
	got := readAll(t, mustReader(t, strings.NewReader(in)))
	require.Len(t, got, 2, "flights")
	require.Equal(t, []int{2, 4}, []int{got[0].Line, got[1].Line}, "lines of the flights")
	assert.Equal(t, -3, got[1].Delay, "delay")
}

func TestReaderBadHeader(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"",
		"date,delay,distance,origin\n2001-01-01T00:01:00,1,2,LAS\n",
		"date,delay,distance,destination,origin\n",
		"Date,Delay,Distance,Origin,Destination\n",
		"2001-01-01T00:01:00,33,2176,LAS,PHL\n",
	} {
		_, err := NewReader(strings.NewReader(in))
		var le *LineError
		if !assert.ErrorAs(t, err, &le, "NewReader(%q): want a *LineError", in) ||
			!assert.ErrorIs(t, err, ErrHeader, "NewReader(%q)", in) ||
			!assert.Equal(t, 1, le.Line, "NewReader(%q): line of the error", in) {
			continue
		}
		assert.True(t, strings.HasPrefix(err.Error(), "workload: line 1: "), "NewReader(%q) error: got %q, want it to start with %q", in, err, "workload: line 1: ")
	}
}

// Each malformed row gives a *LineError naming its line and column, and the Reader goes on.
func TestReaderMalformedRows(t *testing.T) {
	t.Parallel()
	good := "2001-01-01T00:01:00,33,2176,LAS,PHL\n"
	cases := []struct {
		row    string
		column string
	}{
		{"2001-01-01T00:01:00,x33,2176,LAS,PHL", "delay"},
		{"2001-01-01T00:01:00,3.5,2176,LAS,PHL", "delay"},
		{"2001-01-01T00:01:00,,2176,LAS,PHL", "delay"},
		{"2001-01-01T00:01:00,33,2176.0,LAS,PHL", "distance"},
		{"2001-01-01T00:01:00,33,-1,LAS,PHL", "distance"},
		{"2001-13-01T00:01:00,33,2176,LAS,PHL", "date"},
		{"2001-01-01 00:01:00,33,2176,LAS,PHL", "date"},
		{"2001-01-01T00:01:00,33,2176,las,PHL", "origin"},
		{"2001-01-01T00:01:00,33,2176,LAS,PHILA", "destination"},
		{"2001-01-01T00:01:00,33,2176,LAS", ""},
		{"2001-01-01T00:01:00,33,2176,LAS,PHL,X", ""},
		{"2001-01-01T00:01:00", ""},
	}
	for _, c := range cases {
		in := header + good + good + c.row + "\n" + good
		r := mustReader(t, strings.NewReader(in))
		for i := 0; i < 2; i++ {
			_, err := r.Next()
			require.NoError(t, err, "%q: good row %d", c.row, i)
		}
		_, err := r.Next()
		var le *LineError
		if !assert.ErrorAs(t, err, &le, "%q: want an ErrMalformed *LineError", c.row) ||
			!assert.ErrorIs(t, err, ErrMalformed, "%q", c.row) {
			continue
		}
		assert.Equal(t, 4, le.Line, "%q: line of the error", c.row)
		assert.Equal(t, c.column, le.Column, "%q: column of the error", c.row)
		assert.True(t, strings.HasPrefix(err.Error(), "workload: line 4"), "%q: error %q does not start with %q", c.row, err, "workload: line 4")
		if c.column != "" {
			assert.ErrorContains(t, err, "column "+c.column, "%q: error does not name its column", c.row)
		}
		f, err := r.Next()
		if assert.NoError(t, err, "%q: next row after the bad one", c.row) {
			assert.Equal(t, 5, f.Line, "%q: next row after the bad one: want the flight of line 5", c.row)
		}
		_, err = r.Next()
		assert.Equal(t, io.EOF, err, "%q: at the end", c.row)
	}
}

// Invalid CSV quoting and corrupt gzip data are final errors.
func TestReaderFinalErrors(t *testing.T) {
	t.Parallel()
	r := mustReader(t, strings.NewReader(header+"2001-01-01T00:01:00,33,2176,\"LAS,PHL\n"))
	_, err := r.Next()
	var le *LineError
	require.ErrorAs(t, err, &le, "unterminated quote: want a line 2 ErrMalformed *LineError")
	assert.ErrorIs(t, err, ErrMalformed, "unterminated quote")
	assert.Equal(t, 2, le.Line, "unterminated quote: line of the error")
	_, err2 := r.Next()
	assert.EqualError(t, err2, err.Error(), "after a CSV syntax error: want the same error again")

	sample := readSample(t)
	truncated := sample[:len(sample)/2]
	r = mustReader(t, bytes.NewReader(truncated))
	n := 0
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
		n++
	}
	assert.NotEqual(t, io.EOF, err, "truncated gzip after %d flights", n)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "truncated gzip after %d flights", n)
	assert.True(t, strings.HasPrefix(err.Error(), "workload: "), "truncated gzip: error %q lacks the package prefix", err)
	assert.True(t, n > 0 && n < sampleRows, "truncated gzip: got %d flights before the error, want some but not all", n)

	_, err = NewReader(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}))
	assert.Error(t, err, "NewReader(corrupt gzip header)")
}

// Flights returned by the Reader are valid: Validate agrees with the parser.
func TestSampleFlightsValidate(t *testing.T) {
	t.Parallel()
	r := openSample(t)
	for i := 0; i < 1000; i++ {
		f, err := r.Next()
		require.NoError(t, err, "Next() after %d flights", i)
		require.NoError(t, f.Validate(), "Validate(%+v)", f)
	}
}
