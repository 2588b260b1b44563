package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/schemaless-db/schemaless/cells"
)

// Namespace is the UUIDv5 namespace of flight row keys:
// uuid.NewSHA1(uuid.NameSpaceURL, "https://github.com/schemaless-db/schemaless/flights"),
// that is 2aaee986-df22-5654-b0c2-32974ca4cd41. It never changes: stored trips depend on it.
var Namespace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://github.com/schemaless-db/schemaless/flights"))

// The cell a flight becomes.
const (
	// ColumnBase is the column key of a trip's BASE cell, written once when the trip ends.
	ColumnBase = "BASE"
	// BaseRefKey is the ref key of the BASE cell: the first and only version.
	BaseRefKey int64 = 1
)

// Trip is one cell to write, in the form the HTTP client sends: the body is JSON text.
type Trip struct {
	RowKey    uuid.UUID
	ColumnKey string
	RefKey    int64
	// Body is a JSON object as text (UTF-8, no trailing newline).
	Body []byte
}

// Key returns the trip's cell key.
func (t Trip) Key() cells.Key {
	return cells.Key{RowKey: t.RowKey, ColumnKey: t.ColumnKey, RefKey: t.RefKey}
}

// RowKey returns the trip UUID of f: the UUIDv5 (SHA-1) in Namespace of the name
// "<line>|<date>|<delay>|<distance>|<origin>|<destination>", numbers in decimal without leading
// zeros, for example "2|2001-01-01T00:01:00|33|2176|LAS|PHL". The same row of the same file always
// gives the same key; two identical flights on different lines give different keys.
func (f Flight) RowKey() uuid.UUID {
	name := make([]byte, 0, 64)
	name = strconv.AppendInt(name, int64(f.Line), 10)
	name = append(name, '|')
	name = append(name, f.Date...)
	name = append(name, '|')
	name = strconv.AppendInt(name, int64(f.Delay), 10)
	name = append(name, '|')
	name = strconv.AppendInt(name, int64(f.Distance), 10)
	name = append(name, '|')
	name = append(name, f.Origin...)
	name = append(name, '|')
	name = append(name, f.Destination...)
	return uuid.NewSHA1(Namespace, name)
}

// Validate reports, as a *LineError wrapping ErrMalformed, the first field of f that a Reader
// would not have produced: a line before 2, a date not in DateLayout, a negative distance or a
// bad airport code. Flights returned by Reader.Next are valid.
func (f Flight) Validate() error {
	bad := func(col, format string, args ...any) error {
		return &LineError{Line: f.Line, Column: col, Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
	}
	switch {
	case f.Line < 2:
		return bad("", "line %d is not a data line (the header is line 1)", f.Line)
	case !validCode(f.Origin):
		return bad("origin", "%q is not an airport code (3 or 4 of A-Z, 0-9)", f.Origin)
	case !validCode(f.Destination):
		return bad("destination", "%q is not an airport code (3 or 4 of A-Z, 0-9)", f.Destination)
	case f.Distance < 0:
		return bad("distance", "%d is negative", f.Distance)
	}
	if _, err := time.Parse(DateLayout, f.Date); err != nil {
		return bad("date", "%q is not a date in the layout %s", f.Date, DateLayout)
	}
	return nil
}

// baseBody is the BASE body, fields in the order of the documentation.
type baseBody struct {
	Date             string `json:"date"`
	Origin           string `json:"origin"`
	Destination      string `json:"destination"`
	Distance         int    `json:"distance"`
	Delay            int    `json:"delay"`
	OriginCity       string `json:"origin_city"`
	OriginState      string `json:"origin_state"`
	DestinationCity  string `json:"destination_city"`
	DestinationState string `json:"destination_state"`
}

func (f Flight) base(a Airports) baseBody {
	o, d := a[f.Origin], a[f.Destination] // zero Airport (empty city and state) when unknown
	return baseBody{
		Date: f.Date, Origin: f.Origin, Destination: f.Destination,
		Distance: f.Distance, Delay: f.Delay,
		OriginCity: o.City, OriginState: o.State,
		DestinationCity: d.City, DestinationState: d.State,
	}
}

// BaseJSON returns the body of f's BASE cell as JSON text (one object, no trailing newline, no
// HTML escaping):
//
//	{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":2176,"delay":33,
//	 "origin_city":"Las Vegas","origin_state":"NV","destination_city":"Philadelphia",
//	 "destination_state":"PA"}
//
// City and state come from a by airport code; a code that a does not hold gives "" for both, not
// an error (ImportWithStats counts them). An invalid f gives the error of f.Validate.
func (f Flight) BaseJSON(a Airports) ([]byte, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(256)
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f.base(a)); err != nil {
		return nil, fmt.Errorf("workload: line %d: encode BASE body: %w", f.Line, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// BaseCell returns f's BASE cell: key (f.RowKey(), ColumnBase, BaseRefKey) and the stored form of
// the body of BaseJSON, byte for byte what cells.EncodeBody(BaseJSON) gives. AddedID and CreatedAt
// are zero (they are assigned when the cell is applied). An invalid f gives the error of
// f.Validate.
func (f Flight) BaseCell(a Airports) (cells.Cell, error) {
	if err := f.Validate(); err != nil {
		return cells.Cell{}, err
	}
	b := f.base(a)
	// int64 numbers, as cells.EncodeBody stores integers parsed from JSON text.
	body, err := cells.EncodeObject(map[string]any{
		"date": b.Date, "origin": b.Origin, "destination": b.Destination,
		"distance": int64(b.Distance), "delay": int64(b.Delay),
		"origin_city": b.OriginCity, "origin_state": b.OriginState,
		"destination_city": b.DestinationCity, "destination_state": b.DestinationState,
	})
	if err != nil {
		return cells.Cell{}, fmt.Errorf("workload: line %d: encode BASE body: %w", f.Line, err)
	}
	return cells.Cell{
		Key:  cells.Key{RowKey: f.RowKey(), ColumnKey: ColumnBase, RefKey: BaseRefKey},
		Body: body,
	}, nil
}

// BaseTrip returns f's BASE cell as a Trip: key (f.RowKey(), ColumnBase, BaseRefKey) and the
// body of BaseJSON. Errors are those of BaseJSON.
func (f Flight) BaseTrip(a Airports) (Trip, error) {
	body, err := f.BaseJSON(a)
	if err != nil {
		return Trip{}, err
	}
	return Trip{RowKey: f.RowKey(), ColumnKey: ColumnBase, RefKey: BaseRefKey, Body: body}, nil
}
