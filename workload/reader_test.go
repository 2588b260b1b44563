package workload

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every flight of r, failing the test on any error but io.EOF.
func readAll(t testing.TB, r *Reader) []Flight {
	t.Helper()
	var out []Flight
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Next() after %d flights = %v", len(out), err)
		}
		out = append(out, f)
	}
}

// flightFields renders f's columns as the file would write them.
func flightFields(f Flight) []string {
	return []string{f.Date, strconv.Itoa(f.Delay), strconv.Itoa(f.Distance), f.Origin, f.Destination}
}

func TestReadSample(t *testing.T) {
	header, raw := rawSample(t)
	if strings.Join(header, ",") != "date,delay,distance,origin,destination" {
		t.Fatalf("sample header: got %v", header)
	}
	if len(raw) != sampleRows {
		t.Fatalf("raw csv rows of the sample: got %d, want %d", len(raw), sampleRows)
	}
	flights := readAll(t, openSample(t))
	if len(flights) != sampleRows {
		t.Fatalf("flights read: got %d, want %d", len(flights), sampleRows)
	}
	// The sample has no blank or multi-line rows, so the last flight is on the last line.
	if got, want := flights[len(flights)-1].Line, countLines(t); got != want {
		t.Errorf("line of the last flight: got %d, want %d (newlines in the file)", got, want)
	}
	for _, c := range []struct {
		name string
		i    int
	}{{"first", 0}, {"last", len(raw) - 1}} {
		f := flights[c.i]
		if got, want := strings.Join(flightFields(f), ","), strings.Join(raw[c.i], ","); got != want {
			t.Errorf("%s flight: got %s, want %s", c.name, got, want)
		}
		if got, want := f.Line, c.i+2; got != want {
			t.Errorf("%s flight line: got %d, want %d", c.name, got, want)
		}
	}
	for i, f := range flights {
		if got, want := flightFields(f), raw[i]; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("flight %d (line %d): got %v, want %v", i, f.Line, got, want)
		}
		if f.Line != i+2 {
			t.Fatalf("flight %d: got line %d, want %d", i, f.Line, i+2)
		}
	}
	// Known values of the first row, as published (a guard against reading the wrong file).
	if got := flights[0]; got != (Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}) {
		t.Errorf("first flight: got %+v", got)
	}
}

// Plain CSV and gzipped CSV read the same; so do CRLF line ends, a byte order mark and a reader
// that returns one byte at a time.
func TestReaderFormats(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(readSample(t)))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	plain = plain[:bytes.Index(plain, []byte("\n2001-01-01T00:11:00"))+1] // a few hundred rows
	want := readAll(t, mustReader(t, bytes.NewReader(plain)))
	if len(want) < 10 {
		t.Fatalf("plain prefix has %d flights, want at least 10", len(want))
	}
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
		if len(got) != len(want) {
			t.Errorf("%s: got %d flights, want %d", name, len(got), len(want))
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: flight %d: got %+v, want %+v", name, i, got[i], want[i])
				break
			}
		}
	}
}

func mustReader(t testing.TB, r io.Reader) *Reader {
	t.Helper()
	fr, err := NewReader(r)
	if err != nil {
		t.Fatalf("NewReader = %v", err)
	}
	return fr
}

const header = "date,delay,distance,origin,destination\n"

// A blank line is skipped, and line numbers still count it.
func TestReaderLineNumbers(t *testing.T) {
	in := header + "2001-01-01T00:01:00,1,2,LAS,PHL\n\n2001-01-01T00:02:00,-3,4,ATL,SAV\n"
	got := readAll(t, mustReader(t, strings.NewReader(in)))
	if len(got) != 2 || got[0].Line != 2 || got[1].Line != 4 {
		t.Fatalf("got %+v, want flights on lines 2 and 4", got)
	}
	if got[1].Delay != -3 {
		t.Errorf("delay: got %d, want -3", got[1].Delay)
	}
}

func TestReaderBadHeader(t *testing.T) {
	for _, in := range []string{
		"",
		"date,delay,distance,origin\n2001-01-01T00:01:00,1,2,LAS\n",
		"date,delay,distance,destination,origin\n",
		"Date,Delay,Distance,Origin,Destination\n",
		"2001-01-01T00:01:00,33,2176,LAS,PHL\n",
	} {
		_, err := NewReader(strings.NewReader(in))
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || !errors.Is(err, ErrHeader) {
			t.Errorf("NewReader(%q) = %v, want a line 1 ErrHeader *LineError", in, err)
			continue
		}
		if !strings.HasPrefix(err.Error(), "workload: line 1: ") {
			t.Errorf("NewReader(%q) error: got %q, want it to start with %q", in, err, "workload: line 1: ")
		}
	}
}

// Each malformed row gives a *LineError naming its line and column, and the Reader goes on.
func TestReaderMalformedRows(t *testing.T) {
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
			if _, err := r.Next(); err != nil {
				t.Fatalf("%q: good row %d: %v", c.row, i, err)
			}
		}
		_, err := r.Next()
		var le *LineError
		if !errors.As(err, &le) || !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: got %v, want an ErrMalformed *LineError", c.row, err)
			continue
		}
		if le.Line != 4 || le.Column != c.column {
			t.Errorf("%q: got line %d column %q, want line 4 column %q", c.row, le.Line, le.Column, c.column)
		}
		if want := "workload: line 4"; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %q does not start with %q", c.row, err, want)
		}
		if c.column != "" && !strings.Contains(err.Error(), "column "+c.column) {
			t.Errorf("%q: error %q does not name column %s", c.row, err, c.column)
		}
		f, err := r.Next()
		if err != nil || f.Line != 5 {
			t.Errorf("%q: next row after the bad one: got %+v, %v; want the flight of line 5", c.row, f, err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Errorf("%q: at the end: got %v, want io.EOF", c.row, err)
		}
	}
}

// Invalid CSV quoting and corrupt gzip data are final errors.
func TestReaderFinalErrors(t *testing.T) {
	r := mustReader(t, strings.NewReader(header+"2001-01-01T00:01:00,33,2176,\"LAS,PHL\n"))
	_, err := r.Next()
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !errors.Is(err, ErrMalformed) {
		t.Errorf("unterminated quote: got %v, want a line 2 ErrMalformed *LineError", err)
	}
	if _, err2 := r.Next(); err2 == nil || err2.Error() != err.Error() {
		t.Errorf("after a CSV syntax error: got %v, want the same error again", err2)
	}

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
	if err == io.EOF || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated gzip after %d flights: got %v, want an error wrapping io.ErrUnexpectedEOF", n, err)
	}
	if !strings.HasPrefix(err.Error(), "workload: ") {
		t.Errorf("truncated gzip: error %q lacks the package prefix", err)
	}
	if n == 0 || n >= sampleRows {
		t.Errorf("truncated gzip: got %d flights before the error, want some but not all", n)
	}

	if _, err := NewReader(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0})); err == nil {
		t.Error("NewReader(corrupt gzip header) = nil error, want an error")
	}
}

// Flights returned by the Reader are valid: Validate agrees with the parser.
func TestSampleFlightsValidate(t *testing.T) {
	r := openSample(t)
	for i := 0; i < 1000; i++ {
		f, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); err != nil {
			t.Fatalf("Validate(%+v) = %v, want nil", f, err)
		}
	}
}
