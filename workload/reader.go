package workload

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Errors of reading the input files. Each is wrapped in a *LineError naming the line.
var (
	// ErrHeader: the first line of a file is not the expected header.
	ErrHeader = errors.New("workload: bad header")
	// ErrMalformed: a row has the wrong number of columns, a value that does not parse, or is not
	// valid CSV.
	ErrMalformed = errors.New("workload: malformed row")
)

// flightsHeader is the header line a flights file must start with, column by column.
var flightsHeader = []string{"date", "delay", "distance", "origin", "destination"}

// DateLayout is the layout of Flight.Date (time.Parse syntax): local time, no zone.
const DateLayout = "2006-01-02T15:04:05"

// LineError reports a bad line of an input file. Line is 1-based and counts the header (the first
// data row is line 2). Column is the name of the column at fault, or "" when the whole row is.
// Err wraps ErrHeader or ErrMalformed.
type LineError struct {
	Line   int
	Column string
	Err    error
}

// Error returns "workload: line N, column C: reason" (", column C" only when Column is set).
func (e *LineError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "workload: ")
	if e.Column != "" {
		return fmt.Sprintf("workload: line %d, column %s: %s", e.Line, e.Column, msg)
	}
	return fmt.Sprintf("workload: line %d: %s", e.Line, msg)
}

// Unwrap returns the wrapped error, so errors.Is(err, ErrMalformed) works.
func (e *LineError) Unwrap() error { return e.Err }

// Flight is one row of the flights file.
type Flight struct {
	// Line is the 1-based line number of the row in the file; the header is line 1.
	Line int
	// Date is the scheduled departure as written in the file: local time, DateLayout.
	Date string
	// Delay is the arrival delay in whole minutes; negative when early.
	Delay int
	// Distance is the flight distance in whole miles, never negative.
	Distance int
	// Origin and Destination are IATA (or FAA) airport codes: 3 or 4 of [A-Z0-9].
	Origin, Destination string
}

// gzipMagic starts every gzip stream (RFC 1952 §2.3.1).
var gzipMagic = []byte{0x1f, 0x8b}

// Reader reads flights from a flights file, one row at a time. It is not safe for concurrent use.
type Reader struct {
	csv  *csv.Reader
	gz   *gzip.Reader // nil for plain CSV
	err  error        // sticky error: I/O, gzip or CSV syntax
	line int          // line of the last record read
}

// NewReader returns a Reader of the flights file in r, plain CSV or gzip-compressed CSV (told
// apart by the gzip magic bytes). It reads and checks the header line
// (date,delay,distance,origin,destination; a UTF-8 byte order mark is ignored) and blocks on r
// until it has. A header that differs gives a *LineError wrapping ErrHeader; a read error of r is
// returned wrapped. The Reader does not close r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	fr := &Reader{}
	magic, err := br.Peek(len(gzipMagic))
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("workload: read flights: %w", err)
	}
	if bytes.Equal(magic, gzipMagic) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("workload: read flights: gzip: %w", err)
		}
		fr.gz = gz
		src = gz
	}
	fr.csv = csv.NewReader(src)
	fr.csv.FieldsPerRecord = -1 // checked by Next, to name the line in our own words
	fr.csv.ReuseRecord = true
	header, err := fr.csv.Read()
	if err == io.EOF {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: empty file, want %s", ErrHeader, strings.Join(flightsHeader, ","))}
	}
	if err != nil {
		return nil, fr.wrapCSVError(err)
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff")
	}
	if !slices.Equal(header, flightsHeader) {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: got %q, want %q", ErrHeader, strings.Join(header, ","), strings.Join(flightsHeader, ","))}
	}
	fr.line = 1
	return fr, nil
}

// Next returns the next flight. It blocks on the underlying reader and returns io.EOF after the
// last row. A row with the wrong number of columns or a bad value gives a *LineError naming the
// line and column and wrapping ErrMalformed; the Reader stays usable and the next call reads the
// following row. Any other error (I/O, corrupt gzip data, invalid CSV quoting) is final: every
// later call returns it again.
func (r *Reader) Next() (Flight, error) {
	if r.err != nil {
		return Flight{}, r.err
	}
	rec, err := r.csv.Read()
	if err != nil {
		if err != io.EOF {
			err = r.wrapCSVError(err)
		}
		r.err = err
		return Flight{}, err
	}
	line, _ := r.csv.FieldPos(0)
	r.line = line
	return parseFlight(line, rec)
}

// Line returns the line number of the last row returned by Next (1 before the first).
func (r *Reader) Line() int { return r.line }

// wrapCSVError turns an error of encoding/csv into a *LineError or an I/O error.
func (r *Reader) wrapCSVError(err error) error {
	if le := csvLineError(err); le != nil {
		return le
	}
	if r.gz != nil {
		return fmt.Errorf("workload: read flights: gzip: %w", err)
	}
	return fmt.Errorf("workload: read flights: %w", err)
}

// csvLineError turns a *csv.ParseError into a *LineError on the line where the bad record starts,
// or returns nil for another error.
func csvLineError(err error) *LineError {
	var pe *csv.ParseError
	if !errors.As(err, &pe) {
		return nil
	}
	return &LineError{Line: pe.StartLine, Err: fmt.Errorf("%w: invalid CSV at line %d, character %d: %w", ErrMalformed, pe.Line, pe.Column, pe.Err)}
}

func parseFlight(line int, rec []string) (Flight, error) {
	if len(rec) != len(flightsHeader) {
		return Flight{}, &LineError{Line: line, Err: fmt.Errorf("%w: got %d columns, want %d", ErrMalformed, len(rec), len(flightsHeader))}
	}
	bad := func(col int, format string, args ...any) error {
		return &LineError{Line: line, Column: flightsHeader[col], Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
	}
	f := Flight{Line: line, Date: rec[0], Origin: rec[3], Destination: rec[4]}
	if _, err := time.Parse(DateLayout, f.Date); err != nil {
		return Flight{}, bad(0, "%q is not a date in the layout %s", f.Date, DateLayout)
	}
	var err error
	if f.Delay, err = strconv.Atoi(rec[1]); err != nil {
		return Flight{}, bad(1, "%q is not an integer number of minutes", rec[1])
	}
	if f.Distance, err = strconv.Atoi(rec[2]); err != nil || f.Distance < 0 {
		return Flight{}, bad(2, "%q is not a non-negative integer number of miles", rec[2])
	}
	if !validCode(f.Origin) {
		return Flight{}, bad(3, "%q is not an airport code (3 or 4 of A-Z, 0-9)", f.Origin)
	}
	if !validCode(f.Destination) {
		return Flight{}, bad(4, "%q is not an airport code (3 or 4 of A-Z, 0-9)", f.Destination)
	}
	return f, nil
}

// validCode reports whether s looks like an airport code: 3 or 4 characters of [A-Z0-9].
func validCode(s string) bool {
	if len(s) < 3 || len(s) > 4 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
