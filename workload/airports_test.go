package workload

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestLoadAirportsSample(t *testing.T) {
	a := loadSampleAirports(t)
	raw := rawAirports(t)
	if len(a) != len(raw) {
		t.Fatalf("airports: got %d, want %d (rows of airports.csv)", len(a), len(raw))
	}
	na := 0
	for code, rec := range raw {
		ap, ok := a[code]
		if !ok {
			t.Errorf("airport %s missing", code)
			continue
		}
		wantCity, wantState := rec[2], rec[3]
		if wantCity == "NA" {
			wantCity = ""
			na++
		}
		if wantState == "NA" {
			wantState = ""
		}
		lat, _ := strconv.ParseFloat(rec[5], 64)
		lon, _ := strconv.ParseFloat(rec[6], 64)
		want := Airport{IATA: rec[0], Name: rec[1], City: wantCity, State: wantState, Country: rec[4], Latitude: lat, Longitude: lon}
		if ap != want {
			t.Errorf("airport %s: got %+v, want %+v", code, ap, want)
		}
	}
	if na == 0 {
		t.Error("no airport with city NA in the sample: the NA case is untested")
	}
	// Known airports, the expectations read from the file.
	for _, code := range []string{"LAS", "PHL", "N25"} {
		if got, want := a[code].City+", "+a[code].State, raw[code][2]+", "+raw[code][3]; got != want {
			t.Errorf("airport %s: got %q, want %q", code, got, want)
		}
	}
	if got := a["LAS"]; got.City != "Las Vegas" || got.State != "NV" {
		t.Errorf("LAS: got %q, %q; want Las Vegas, NV", got.City, got.State)
	}
}

// Every airport of the flights sample is in airports.csv.
func TestSampleAirportsKnown(t *testing.T) {
	raw := rawAirports(t)
	_, recs := rawSample(t)
	for _, rec := range recs {
		for _, code := range rec[3:5] {
			if _, ok := raw[code]; !ok {
				t.Fatalf("airport %s of the sample is not in airports.csv", code)
			}
		}
	}
}

func TestLoadAirportsMalformed(t *testing.T) {
	const h = "iata,name,city,state,country,latitude,longitude\n"
	const good = "LAS,McCarran International,Las Vegas,NV,USA,36.08036111,-115.1523333\n"
	cases := []struct {
		in     string
		line   int
		column string
		target error
	}{
		{"", 1, "", ErrHeader},
		{"iata,name,city,state,country\n", 1, "", ErrHeader},
		{h + good + "PHL,Philadelphia Intl,Philadelphia,PA,USA,39.87\n", 3, "", ErrMalformed},
		{h + good + "PHL,Philadelphia Intl,Philadelphia,PA,USA,north,-75.2\n", 3, "latitude", ErrMalformed},
		{h + good + "PHL,Philadelphia Intl,Philadelphia,PA,USA,39.87,-275.2\n", 3, "longitude", ErrMalformed},
		{h + good + "ph,Philadelphia Intl,Philadelphia,PA,USA,39.87,-75.2\n", 3, "iata", ErrMalformed},
		{h + good + good, 3, "iata", ErrMalformed},
		{h + good + "PHL,\"Philadelphia Intl,Philadelphia,PA,USA,39.87,-75.2\n", 3, "", ErrMalformed},
	}
	for _, c := range cases {
		_, err := LoadAirports(strings.NewReader(c.in))
		var le *LineError
		if !errors.As(err, &le) || !errors.Is(err, c.target) {
			t.Errorf("LoadAirports(%q) = %v, want a *LineError wrapping %v", c.in, err, c.target)
			continue
		}
		if le.Line != c.line || le.Column != c.column {
			t.Errorf("LoadAirports(%q): got line %d column %q, want line %d column %q", c.in, le.Line, le.Column, c.line, c.column)
		}
	}
}
