package workload

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadAirportsSample(t *testing.T) {
	t.Parallel()
	a := loadSampleAirports(t)
	raw := rawAirports(t)
	require.Len(t, a, len(raw), "airports: want the rows of airports.csv")
	na := 0
	for code, rec := range raw {
		ap, ok := a[code]
		if !assert.True(t, ok, "airport %s missing", code) {
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
		assert.Equal(t, want, ap, "airport %s", code)
	}
	assert.NotZero(t, na, "no airport with city NA in the sample: the NA case is untested")
	// Known airports, the expectations read from the file.
	for _, code := range []string{"LAS", "PHL", "N25"} {
		assert.Equal(t, raw[code][2]+", "+raw[code][3], a[code].City+", "+a[code].State, "airport %s: city, state", code)
	}
	assert.Equal(t, "Las Vegas", a["LAS"].City, "LAS city")
	assert.Equal(t, "NV", a["LAS"].State, "LAS state")
}

// Every airport of the flights sample is in airports.csv.
func TestSampleAirportsKnown(t *testing.T) {
	t.Parallel()
	raw := rawAirports(t)
	_, recs := rawSample(t)
	for _, rec := range recs {
		for _, code := range rec[3:5] {
			if _, ok := raw[code]; !ok {
				require.Failf(t, "unknown airport", "airport %s of the sample is not in airports.csv", code)
			}
		}
	}
}

func TestLoadAirportsMalformed(t *testing.T) {
	t.Parallel()
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
		if !assert.ErrorAs(t, err, &le, "LoadAirports(%q): want a *LineError", c.in) ||
			!assert.ErrorIs(t, err, c.target, "LoadAirports(%q)", c.in) {
			continue
		}
		assert.Equal(t, c.line, le.Line, "LoadAirports(%q): line", c.in)
		assert.Equal(t, c.column, le.Column, "LoadAirports(%q): column", c.in)
	}
}
