package workload

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// airportsHeader is the header line an airports file must start with, column by column.
var airportsHeader = []string{"iata", "name", "city", "state", "country", "latitude", "longitude"}

// notAvailable is how airports.csv spells a missing city or state.
const notAvailable = "NA"

// Airport is one row of airports.csv.
type Airport struct {
	// IATA is the airport code (IATA, or FAA for small fields): 3 or 4 of [A-Z0-9].
	IATA string
	// Name is the airport's name, for example "McCarran International".
	Name string
	// City and State are where the airport is ("Las Vegas", "NV"); "" when the file says NA.
	City, State string
	// Country is the country's name, for example "USA".
	Country string
	// Latitude and Longitude are in decimal degrees, north and east positive.
	Latitude, Longitude float64
}

// Airports maps an airport code to its airport. A nil Airports is valid and knows no airport. An
// Airports is safe for concurrent reads.
type Airports map[string]Airport

// LoadAirports reads airports.csv (iata,name,city,state,country,latitude,longitude, with a header
// line) from r, blocking on r until its end. A city or state written NA (not available) is kept as
// "". A bad header, a row with the wrong number of columns, a bad airport code or coordinate, or a
// code seen twice gives a *LineError naming the line and column (wrapping ErrHeader or
// ErrMalformed); a read error of r is returned wrapped. It does not close r.
func LoadAirports(r io.Reader) (Airports, error) {
	cr := csv.NewReader(bufio.NewReader(r))
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: empty file, want %s", ErrHeader, strings.Join(airportsHeader, ","))}
	}
	if err != nil {
		return nil, airportsCSVError(err)
	}
	if len(header) > 0 {
		header[0] = strings.TrimPrefix(header[0], "\ufeff")
	}
	if !slices.Equal(header, airportsHeader) {
		return nil, &LineError{Line: 1, Err: fmt.Errorf("%w: got %q, want %q", ErrHeader, strings.Join(header, ","), strings.Join(airportsHeader, ","))}
	}
	a := make(Airports, 4096)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return a, nil
		}
		if err != nil {
			return nil, airportsCSVError(err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(airportsHeader) {
			return nil, &LineError{Line: line, Err: fmt.Errorf("%w: got %d columns, want %d", ErrMalformed, len(rec), len(airportsHeader))}
		}
		bad := func(col int, format string, args ...any) error {
			return &LineError{Line: line, Column: airportsHeader[col], Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
		}
		ap := Airport{IATA: rec[0], Name: rec[1], City: orEmpty(rec[2]), State: orEmpty(rec[3]), Country: rec[4]}
		if !validCode(ap.IATA) {
			return nil, bad(0, "%q is not an airport code (3 or 4 of A-Z, 0-9)", ap.IATA)
		}
		if _, dup := a[ap.IATA]; dup {
			return nil, bad(0, "airport %s is listed twice", ap.IATA)
		}
		if ap.Latitude, err = strconv.ParseFloat(rec[5], 64); err != nil || ap.Latitude < -90 || ap.Latitude > 90 {
			return nil, bad(5, "%q is not a latitude in degrees", rec[5])
		}
		if ap.Longitude, err = strconv.ParseFloat(rec[6], 64); err != nil || ap.Longitude < -180 || ap.Longitude > 180 {
			return nil, bad(6, "%q is not a longitude in degrees", rec[6])
		}
		a[ap.IATA] = ap
	}
}

func orEmpty(s string) string {
	if s == notAvailable {
		return ""
	}
	return s
}

func airportsCSVError(err error) error {
	if le := csvLineError(err); le != nil {
		return le
	}
	return fmt.Errorf("workload: read airports: %w", err)
}
