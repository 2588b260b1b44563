package workload

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/schemaless-db/schemaless/cells"
)

// uuidV5 computes a name-based SHA-1 UUID by hand (RFC 9562 §5.5), independently of package uuid.
func uuidV5(ns uuid.UUID, name string) uuid.UUID {
	h := sha1.New()
	h.Write(ns[:])
	h.Write([]byte(name))
	var u uuid.UUID
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC variant
	return u
}

func TestNamespacePinned(t *testing.T) {
	t.Parallel()
	const want = "2aaee986-df22-5654-b0c2-32974ca4cd41"
	assert.Equal(t, want, Namespace.String(), "Namespace")
	assert.Equal(t, want, uuidV5(uuid.NameSpaceURL, "https://github.com/schemaless-db/schemaless/flights").String(), "hand-computed namespace")
}

// Row keys never change. The vectors were computed with Python's uuid.uuid5, not with this code.
func TestRowKeyVectors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		f    Flight
		want string
	}{
		{Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}, "70d716ad-01f8-5efa-98c7-c85bf139ddb0"},
		{Flight{Line: 3, Date: "2001-01-01T00:01:00", Delay: 19, Distance: 215, Origin: "ATL", Destination: "SAV"}, "de955367-0622-5013-bf19-3a55d2e2d0a3"},
		{Flight{Line: 100001, Date: "2001-01-07T08:40:00", Delay: -5, Distance: 303, Origin: "HOU", Destination: "MSY"}, "1a2e6f11-b3b6-527d-b601-1a8badc3781a"},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.f.RowKey().String(), "RowKey(%+v)", c.f)
	}
	// The same vectors come out of the sample file: its first two and its last flight.
	flights := readAll(t, openSample(t))
	for i, f := range []Flight{flights[0], flights[1], flights[len(flights)-1]} {
		assert.Equal(t, cases[i].f, f, "sample flight for vector %d", i)
	}
}

// Every row key of the sample is unique and is the UUIDv5 of the documented name, computed here
// from the raw CSV text.
func TestRowKeysSample(t *testing.T) {
	t.Parallel()
	_, raw := rawSample(t)
	flights := readAll(t, openSample(t))
	seen := make(map[uuid.UUID]int, len(flights))
	for i, f := range flights { // a plain check first: see readAll
		k := f.RowKey()
		if j, dup := seen[k]; dup {
			require.Failf(t, "row key repeated", "row key %s of line %d repeats line %d", k, f.Line, j)
		}
		seen[k] = f.Line
		if i%97 == 0 || i == len(flights)-1 {
			name := strconv.Itoa(i+2) + "|" + strings.Join(raw[i], "|")
			assert.Equal(t, uuidV5(Namespace, name), k, "RowKey of line %d: want the UUIDv5 of %q", f.Line, name)
		}
	}
	// The sample holds identical flights on different lines: they must be different trips.
	firstLine := map[string]int{}
	dups := 0
	for i, rec := range raw {
		s := strings.Join(rec, ",")
		if j, ok := firstLine[s]; ok {
			dups++
			assert.NotEqual(t, flights[j].RowKey(), flights[i].RowKey(), "identical flights on lines %d and %d share a row key", j+2, i+2)
			continue
		}
		firstLine[s] = i
	}
	assert.NotZero(t, dups, "no identical flights in the sample: the different-lines case is untested")
}

// decodeJSON decodes a JSON object keeping numbers as their text.
func decodeJSON(t testing.TB, p []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var m map[string]any
	require.NoError(t, d.Decode(&m), "decode %s", p)
	return m
}

// expectedBase builds the BASE body of a raw CSV record with city and state from a raw
// airports.csv record, independently of the package.
func expectedBase(rec []string, airports map[string][]string) map[string]any {
	place := func(code string) (string, string) {
		ap, ok := airports[code]
		if !ok {
			return "", ""
		}
		city, state := ap[2], ap[3]
		if city == "NA" {
			city = ""
		}
		if state == "NA" {
			state = ""
		}
		return city, state
	}
	oc, os := place(rec[3])
	dc, ds := place(rec[4])
	return map[string]any{
		"date": rec[0], "delay": json.Number(rec[1]), "distance": json.Number(rec[2]),
		"origin": rec[3], "destination": rec[4],
		"origin_city": oc, "origin_state": os, "destination_city": dc, "destination_state": ds,
	}
}

// BASE cells of the sample decode back to the fields of the file joined with airports.csv; the
// JSON text and the stored body hold the same value, byte for byte what the server stores.
func TestBaseSample(t *testing.T) {
	t.Parallel()
	_, raw := rawSample(t)
	rawAp := rawAirports(t)
	a := loadSampleAirports(t)
	flights := readAll(t, openSample(t))
	// Every 11th flight and the last (9,092 bodies); every 101st with -short or -race (991).
	step := 11
	if testing.Short() || raceEnabled {
		step = 101
	}
	var rows []int
	for i := 0; i < len(flights); i += step {
		rows = append(rows, i)
	}
	rows = append(rows, len(flights)-1)
	for _, i := range rows {
		f := flights[i]
		want := expectedBase(raw[i], rawAp)
		c, err := f.BaseCell(a)
		require.NoError(t, err, "BaseCell(line %d)", f.Line)
		require.Equal(t, cells.Key{RowKey: f.RowKey(), ColumnKey: "BASE", RefKey: 1}, c.Key, "BaseCell(line %d) key", f.Line)
		require.Zero(t, c.AddedID, "BaseCell(line %d) added_id", f.Line)
		require.True(t, c.CreatedAt.IsZero(), "BaseCell(line %d) created_at %v, want zero", f.Line, c.CreatedAt)
		stored, err := c.Body.JSON()
		require.NoError(t, err, "line %d: Body.JSON()", f.Line)
		require.Equal(t, want, decodeJSON(t, stored), "line %d: stored body", f.Line)
		text, err := f.BaseJSON(a)
		require.NoError(t, err, "BaseJSON(line %d)", f.Line)
		require.Equal(t, want, decodeJSON(t, text), "line %d: BaseJSON %s", f.Line, text)
		server, err := cells.EncodeBody(text)
		require.NoError(t, err, "line %d: EncodeBody(%s)", f.Line, text)
		require.Equal(t, server, c.Body, "line %d: BaseCell body: want EncodeBody(BaseJSON)", f.Line)
	}
}

// The city join on a known airport, the expectation read from airports.csv.
func TestBaseJoinLAS(t *testing.T) {
	t.Parallel()
	las := rawAirports(t)["LAS"]
	a := loadSampleAirports(t)
	f := Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}
	text, err := f.BaseJSON(a)
	require.NoError(t, err, "BaseJSON")
	m := decodeJSON(t, text)
	assert.Equal(t, las[2], m["origin_city"], "origin city")
	assert.Equal(t, las[3], m["origin_state"], "origin state")
	assert.Equal(t, []string{"Las Vegas", "NV"}, las[2:4], "where airports.csv says LAS is")
	assert.True(t, strings.HasPrefix(string(text), `{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":2176,"delay":33,`),
		"BaseJSON: got %s, want the documented field order and integer numbers", text)
}

// An unknown airport gives empty city and state, not an error; text is not HTML-escaped.
func TestBaseUnknownAirport(t *testing.T) {
	t.Parallel()
	a := Airports{"LAS": {IATA: "LAS", City: "A & B <C>", State: "NV"}}
	f := Flight{Line: 9, Date: "2001-01-01T00:01:00", Delay: -13, Distance: 1, Origin: "LAS", Destination: "ZZZ"}
	for _, a := range []Airports{a, nil} {
		text, err := f.BaseJSON(a)
		require.NoError(t, err, "BaseJSON")
		m := decodeJSON(t, text)
		assert.Equal(t, "", m["destination_city"], "unknown destination: city")
		assert.Equal(t, "", m["destination_state"], "unknown destination: state")
		assert.Equal(t, json.Number("-13"), m["delay"], "delay")
		_, err = f.BaseCell(a)
		assert.NoError(t, err, "BaseCell")
	}
	text, _ := f.BaseJSON(a)
	assert.Contains(t, string(text), `"origin_city":"A & B <C>"`, "BaseJSON: want the city unescaped")
}

func TestBaseInvalidFlight(t *testing.T) {
	t.Parallel()
	good := Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}
	cases := []struct {
		mutate func(*Flight)
		column string
	}{
		{func(f *Flight) { f.Line = 0 }, ""},
		{func(f *Flight) { f.Line = 1 }, ""},
		{func(f *Flight) { f.Date = "" }, "date"},
		{func(f *Flight) { f.Date = time.Date(2001, 1, 1, 0, 1, 0, 0, time.UTC).Format(time.RFC3339) }, "date"},
		{func(f *Flight) { f.Distance = -1 }, "distance"},
		{func(f *Flight) { f.Origin = "" }, "origin"},
		{func(f *Flight) { f.Destination = "phl" }, "destination"},
	}
	for i, c := range cases {
		f := good
		c.mutate(&f)
		for name, call := range map[string]func() error{
			"BaseJSON": func() error { _, err := f.BaseJSON(nil); return err },
			"BaseCell": func() error { _, err := f.BaseCell(nil); return err },
			"BaseTrip": func() error { _, err := f.BaseTrip(nil); return err },
		} {
			err := call()
			var le *LineError
			if assert.ErrorAs(t, err, &le, "case %d %s(%+v): want an ErrMalformed *LineError", i, name, f) {
				assert.ErrorIs(t, err, ErrMalformed, "case %d %s(%+v)", i, name, f)
				assert.Equal(t, f.Line, le.Line, "case %d %s(%+v): line of the error", i, name, f)
				assert.Equal(t, c.column, le.Column, "case %d %s(%+v): column of the error", i, name, f)
			}
		}
	}
	assert.NoError(t, good.Validate(), "Validate(%+v)", good)
}

func TestBaseTrip(t *testing.T) {
	t.Parallel()
	a := loadSampleAirports(t)
	f := Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}
	tr, err := f.BaseTrip(a)
	require.NoError(t, err, "BaseTrip")
	text, _ := f.BaseJSON(a)
	want := cells.Key{RowKey: uuid.MustParse("70d716ad-01f8-5efa-98c7-c85bf139ddb0"), ColumnKey: "BASE", RefKey: 1}
	assert.Equal(t, want, tr.Key(), "BaseTrip key")
	assert.Equal(t, string(text), string(tr.Body), "BaseTrip body: want BaseJSON")
	assert.NoError(t, tr.Key().Validate(), "trip key Validate()")
}
