package workload

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	const want = "2aaee986-df22-5654-b0c2-32974ca4cd41"
	if got := Namespace.String(); got != want {
		t.Errorf("Namespace: got %s, want %s", got, want)
	}
	if got := uuidV5(uuid.NameSpaceURL, "https://github.com/schemaless-db/schemaless/flights").String(); got != want {
		t.Errorf("hand-computed namespace: got %s, want %s", got, want)
	}
}

// Row keys never change. The vectors were computed with Python's uuid.uuid5, not with this code.
func TestRowKeyVectors(t *testing.T) {
	cases := []struct {
		f    Flight
		want string
	}{
		{Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}, "70d716ad-01f8-5efa-98c7-c85bf139ddb0"},
		{Flight{Line: 3, Date: "2001-01-01T00:01:00", Delay: 19, Distance: 215, Origin: "ATL", Destination: "SAV"}, "de955367-0622-5013-bf19-3a55d2e2d0a3"},
		{Flight{Line: 100001, Date: "2001-01-07T08:40:00", Delay: -5, Distance: 303, Origin: "HOU", Destination: "MSY"}, "1a2e6f11-b3b6-527d-b601-1a8badc3781a"},
	}
	for _, c := range cases {
		if got := c.f.RowKey().String(); got != c.want {
			t.Errorf("RowKey(%+v): got %s, want %s", c.f, got, c.want)
		}
	}
	// The same vectors come out of the sample file: its first two and its last flight.
	flights := readAll(t, openSample(t))
	for i, f := range []Flight{flights[0], flights[1], flights[len(flights)-1]} {
		if f != cases[i].f {
			t.Errorf("sample flight for vector %d: got %+v, want %+v", i, f, cases[i].f)
		}
	}
}

// Every row key of the sample is unique and is the UUIDv5 of the documented name, computed here
// from the raw CSV text.
func TestRowKeysSample(t *testing.T) {
	_, raw := rawSample(t)
	flights := readAll(t, openSample(t))
	seen := make(map[uuid.UUID]int, len(flights))
	for i, f := range flights {
		k := f.RowKey()
		if j, dup := seen[k]; dup {
			t.Fatalf("row key %s of line %d repeats line %d", k, f.Line, j)
		}
		seen[k] = f.Line
		if i%97 == 0 || i == len(flights)-1 {
			name := strconv.Itoa(i+2) + "|" + strings.Join(raw[i], "|")
			if want := uuidV5(Namespace, name); k != want {
				t.Errorf("RowKey of line %d: got %s, want %s (UUIDv5 of %q)", f.Line, k, want, name)
			}
		}
	}
	// The sample holds identical flights on different lines: they must be different trips.
	firstLine := map[string]int{}
	dups := 0
	for i, rec := range raw {
		s := strings.Join(rec, ",")
		if j, ok := firstLine[s]; ok {
			dups++
			if flights[i].RowKey() == flights[j].RowKey() {
				t.Errorf("identical flights on lines %d and %d share row key %s", j+2, i+2, flights[i].RowKey())
			}
			continue
		}
		firstLine[s] = i
	}
	if dups == 0 {
		t.Error("no identical flights in the sample: the different-lines case is untested")
	}
}

// decodeJSON decodes a JSON object keeping numbers as their text.
func decodeJSON(t testing.TB, p []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %s: %v", p, err)
	}
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
		if err != nil {
			t.Fatalf("BaseCell(line %d) = %v", f.Line, err)
		}
		if c.RowKey != f.RowKey() || c.ColumnKey != "BASE" || c.RefKey != 1 || c.AddedID != 0 || !c.CreatedAt.IsZero() {
			t.Fatalf("BaseCell(line %d) key: got %v added %d created %v, want %s/BASE/1, zero", f.Line, c.Key, c.AddedID, c.CreatedAt, f.RowKey())
		}
		stored, err := c.Body.JSON()
		if err != nil {
			t.Fatalf("line %d: Body.JSON() = %v", f.Line, err)
		}
		if got := decodeJSON(t, stored); !reflect.DeepEqual(got, want) {
			t.Fatalf("line %d: stored body: got %v, want %v", f.Line, got, want)
		}
		text, err := f.BaseJSON(a)
		if err != nil {
			t.Fatalf("BaseJSON(line %d) = %v", f.Line, err)
		}
		if got := decodeJSON(t, text); !reflect.DeepEqual(got, want) {
			t.Fatalf("line %d: BaseJSON: got %s, want %v", f.Line, text, want)
		}
		server, err := cells.EncodeBody(text)
		if err != nil {
			t.Fatalf("line %d: EncodeBody(%s) = %v", f.Line, text, err)
		}
		if !bytes.Equal(server, c.Body) {
			t.Fatalf("line %d: BaseCell body differs from EncodeBody(BaseJSON)", f.Line)
		}
	}
}

// The city join on a known airport, the expectation read from airports.csv.
func TestBaseJoinLAS(t *testing.T) {
	las := rawAirports(t)["LAS"]
	a := loadSampleAirports(t)
	f := Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}
	text, err := f.BaseJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeJSON(t, text)
	if m["origin_city"] != las[2] || m["origin_state"] != las[3] {
		t.Errorf("origin city, state: got %v, %v; want %s, %s", m["origin_city"], m["origin_state"], las[2], las[3])
	}
	if las[2] != "Las Vegas" || las[3] != "NV" {
		t.Errorf("airports.csv says LAS is in %s, %s; want Las Vegas, NV", las[2], las[3])
	}
	if !bytes.HasPrefix(text, []byte(`{"date":"2001-01-01T00:01:00","origin":"LAS","destination":"PHL","distance":2176,"delay":33,`)) {
		t.Errorf("BaseJSON: got %s, want the documented field order and integer numbers", text)
	}
}

// An unknown airport gives empty city and state, not an error; text is not HTML-escaped.
func TestBaseUnknownAirport(t *testing.T) {
	a := Airports{"LAS": {IATA: "LAS", City: "A & B <C>", State: "NV"}}
	f := Flight{Line: 9, Date: "2001-01-01T00:01:00", Delay: -13, Distance: 1, Origin: "LAS", Destination: "ZZZ"}
	for _, a := range []Airports{a, nil} {
		text, err := f.BaseJSON(a)
		if err != nil {
			t.Fatalf("BaseJSON = %v", err)
		}
		m := decodeJSON(t, text)
		if m["destination_city"] != "" || m["destination_state"] != "" {
			t.Errorf("unknown destination: got %v, %v; want empty", m["destination_city"], m["destination_state"])
		}
		if m["delay"] != json.Number("-13") {
			t.Errorf("delay: got %v, want -13", m["delay"])
		}
		if _, err := f.BaseCell(a); err != nil {
			t.Errorf("BaseCell = %v", err)
		}
	}
	text, _ := f.BaseJSON(a)
	if !bytes.Contains(text, []byte(`"origin_city":"A & B <C>"`)) {
		t.Errorf("BaseJSON: got %s, want the city unescaped", text)
	}
}

func TestBaseInvalidFlight(t *testing.T) {
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
			if !errors.As(err, &le) || !errors.Is(err, ErrMalformed) || le.Column != c.column || le.Line != f.Line {
				t.Errorf("case %d %s(%+v) = %v, want an ErrMalformed *LineError at line %d column %q", i, name, f, err, f.Line, c.column)
			}
		}
	}
	if err := good.Validate(); err != nil {
		t.Errorf("Validate(%+v) = %v, want nil", good, err)
	}
}

func TestBaseTrip(t *testing.T) {
	a := loadSampleAirports(t)
	f := Flight{Line: 2, Date: "2001-01-01T00:01:00", Delay: 33, Distance: 2176, Origin: "LAS", Destination: "PHL"}
	tr, err := f.BaseTrip(a)
	if err != nil {
		t.Fatal(err)
	}
	text, _ := f.BaseJSON(a)
	want := cells.Key{RowKey: uuid.MustParse("70d716ad-01f8-5efa-98c7-c85bf139ddb0"), ColumnKey: "BASE", RefKey: 1}
	if tr.Key() != want || !bytes.Equal(tr.Body, text) {
		t.Errorf("BaseTrip: got %v %s, want %v %s", tr.Key(), tr.Body, want, text)
	}
	if err := tr.Key().Validate(); err != nil {
		t.Errorf("trip key Validate() = %v", err)
	}
}
