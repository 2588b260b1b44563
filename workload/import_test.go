package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// synthetic returns a flights file of n rows; row i (0-based, on line i+2) has delay i.
func synthetic(n int, codes ...string) string {
	if len(codes) == 0 {
		codes = []string{"LAS", "PHL"}
	}
	var b strings.Builder
	b.WriteString(header)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "2001-01-01T00:01:00,%d,100,%s,%s\n", i, codes[i%len(codes)], codes[(i+1)%len(codes)])
	}
	return b.String()
}

// recorder is a send function that keeps every batch.
type recorder struct {
	sizes []int
	trips []Trip
	fail  func(call int) error // error to return from call number call (0-based), or nil
}

func (r *recorder) send(ctx context.Context, batch []Trip) error {
	if r.fail != nil {
		if err := r.fail(len(r.sizes)); err != nil {
			r.sizes = append(r.sizes, -len(batch)) // a failed call, marked negative
			return err
		}
	}
	r.sizes = append(r.sizes, len(batch))
	r.trips = append(r.trips, batch...)
	return nil
}

func TestImportBatchSizes(t *testing.T) {
	cases := []struct {
		rows, batch, limit int
		want               []int
	}{
		{23, 5, 0, []int{5, 5, 5, 5, 3}},
		{23, 5, -1, []int{5, 5, 5, 5, 3}},
		{23, 5, 12, []int{5, 5, 2}},
		{23, 5, 10, []int{5, 5}},
		{23, 5, 23, []int{5, 5, 5, 5, 3}},
		{23, 5, 100, []int{5, 5, 5, 5, 3}},
		{23, 23, 0, []int{23}},
		{23, 24, 0, []int{23}},
		{23, 1, 3, []int{1, 1, 1}},
		{20, 5, 0, []int{5, 5, 5, 5}},
		{0, 5, 0, nil},
		{23, 5, 1, []int{1}},
	}
	for _, c := range cases {
		name := fmt.Sprintf("rows=%d/batch=%d/limit=%d", c.rows, c.batch, c.limit)
		var rec recorder
		var progress []int
		n, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(c.rows))), nil,
			c.batch, c.limit, rec.send, func(done int) { progress = append(progress, done) })
		if err != nil {
			t.Errorf("%s: Import = %v", name, err)
			continue
		}
		if !reflect.DeepEqual(rec.sizes, c.want) {
			t.Errorf("%s: batch sizes: got %v, want %v", name, rec.sizes, c.want)
		}
		total := 0
		var wantProgress []int
		for _, s := range c.want {
			total += s
			wantProgress = append(wantProgress, total)
		}
		if n != total || len(rec.trips) != total {
			t.Errorf("%s: got n=%d and %d trips sent, want %d", name, n, len(rec.trips), total)
		}
		if !reflect.DeepEqual(progress, wantProgress) {
			t.Errorf("%s: progress: got %v, want %v", name, progress, wantProgress)
		}
		// Every flight once, in file order: trip i is the flight of line i+2 (delay i).
		for i, tr := range rec.trips {
			m := decodeJSON(t, tr.Body)
			if m["delay"] != jsonNumber(i) || tr.ColumnKey != ColumnBase || tr.RefKey != BaseRefKey {
				t.Errorf("%s: trip %d: got %s/%s/%d %s, want the flight of line %d", name, i, tr.RowKey, tr.ColumnKey, tr.RefKey, tr.Body, i+2)
				break
			}
			if want := uuidV5(Namespace, fmt.Sprintf("%d|2001-01-01T00:01:00|%d|100|%s|%s", i+2, i, m["origin"], m["destination"])); tr.RowKey != want {
				t.Errorf("%s: trip %d: row key got %s, want %s", name, i, tr.RowKey, want)
				break
			}
		}
	}
}

func jsonNumber(i int) any { return json.Number(strconv.Itoa(i)) }

// The whole sample, in batches of 1,000: every flight sent exactly once, no unknown airport.
func TestImportSample(t *testing.T) {
	a := loadSampleAirports(t)
	var rec recorder
	calls, last := 0, 0
	st, err := ImportWithStats(context.Background(), openSample(t), a, 1000, 0, rec.send, func(done int) {
		calls++
		if done <= last {
			t.Errorf("progress went from %d to %d", last, done)
		}
		last = done
	})
	if err != nil {
		t.Fatalf("ImportWithStats = %v", err)
	}
	if st.Flights != sampleRows || st.Batches != sampleRows/1000 || calls != st.Batches || last != sampleRows {
		t.Errorf("got %+v, %d progress calls ending at %d; want %d flights in %d batches", st, calls, last, sampleRows, sampleRows/1000)
	}
	if st.UnknownAirports != nil {
		t.Errorf("unknown airports: got %v, want none", st.UnknownAirports)
	}
	for i, s := range rec.sizes {
		if s != 1000 {
			t.Fatalf("batch %d: got %d trips, want 1000", i, s)
		}
	}
	flights := readAll(t, openSample(t))
	seen := make(map[uuid.UUID]bool, len(rec.trips))
	for i, tr := range rec.trips {
		if seen[tr.RowKey] {
			t.Fatalf("trip %d: row key %s sent twice", i, tr.RowKey)
		}
		seen[tr.RowKey] = true
		if want := flights[i].RowKey(); tr.RowKey != want {
			t.Fatalf("trip %d: got row key %s, want %s (line %d)", i, tr.RowKey, want, flights[i].Line)
		}
	}
	if len(seen) != sampleRows {
		t.Errorf("distinct row keys sent: got %d, want %d", len(seen), sampleRows)
	}
}

func TestImportUnknownAirports(t *testing.T) {
	a := Airports{"LAS": {IATA: "LAS", City: "Las Vegas", State: "NV"}}
	// Rows alternate LAS->XXX, XXX->YYY, YYY->LAS over 7 rows.
	var rec recorder
	st, err := ImportWithStats(context.Background(), mustReader(t, strings.NewReader(synthetic(7, "LAS", "XXX", "YYY"))), a, 3, 0, rec.send, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Independently: count the ends of each row of the file that are not LAS.
	want := map[string]int{}
	codes := []string{"LAS", "XXX", "YYY"}
	for i := 0; i < 7; i++ {
		for _, c := range []string{codes[i%3], codes[(i+1)%3]} {
			if c != "LAS" {
				want[c]++
			}
		}
	}
	if !reflect.DeepEqual(st.UnknownAirports, want) {
		t.Errorf("unknown airports: got %v, want %v", st.UnknownAirports, want)
	}
	if st.Flights != 7 || st.Batches != 3 {
		t.Errorf("got %+v, want 7 flights in 3 batches", st)
	}
}

func TestImportCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec recorder
	rec.fail = func(call int) error {
		if call == 2 {
			cancel() // the third batch is accepted, then the context ends
		}
		return nil
	}
	n, err := Import(ctx, mustReader(t, strings.NewReader(synthetic(100))), nil, 10, 0, rec.send, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Import after cancel: got %v, want context.Canceled", err)
	}
	if n != 30 || !reflect.DeepEqual(rec.sizes, []int{10, 10, 10}) {
		t.Errorf("after cancel: got n=%d, batches %v; want 30 in [10 10 10]", n, rec.sizes)
	}

	// A context done before the start sends nothing.
	rec = recorder{}
	n, err = Import(ctx, mustReader(t, strings.NewReader(synthetic(5))), nil, 10, 0, rec.send, nil)
	if !errors.Is(err, context.Canceled) || n != 0 || rec.sizes != nil {
		t.Errorf("canceled before start: got n=%d, %v, batches %v; want 0, context.Canceled, none", n, err, rec.sizes)
	}

	// A context that ends while the last partial batch is being filled: that batch is dropped.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	rec = recorder{}
	calls := 0
	n, err = Import(ctx2, mustReader(t, strings.NewReader(synthetic(15))), nil, 10, 0, rec.send, func(int) {
		calls++
		cancel2()
	})
	if !errors.Is(err, context.Canceled) || n != 10 || !reflect.DeepEqual(rec.sizes, []int{10}) || calls != 1 {
		t.Errorf("canceled after the first batch: got n=%d, %v, batches %v; want 10, context.Canceled, [10]", n, err, rec.sizes)
	}
}

// cancelAtEOF is an io.Reader that ends a context when its reader reaches the end.
type cancelAtEOF struct {
	r      io.Reader
	cancel context.CancelFunc
}

func (c cancelAtEOF) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		c.cancel()
	}
	return n, err
}

// A context that ends while the last flight is being read: the last partial batch is not sent.
func TestImportCancelBeforeLastBatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec recorder
	in := cancelAtEOF{r: strings.NewReader(synthetic(15)), cancel: cancel}
	n, err := Import(ctx, mustReader(t, in), nil, 10, 0, rec.send, nil)
	if !errors.Is(err, context.Canceled) || n != 10 || !reflect.DeepEqual(rec.sizes, []int{10}) {
		t.Errorf("got n=%d, %v, batches %v; want 10, context.Canceled, [10]", n, err, rec.sizes)
	}
}

func TestImportSendError(t *testing.T) {
	boom := errors.New("boom")
	var rec recorder
	rec.fail = func(call int) error {
		if call == 1 {
			return boom
		}
		return nil
	}
	n, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(30))), nil, 10, 0, rec.send, nil)
	if !errors.Is(err, boom) || n != 10 {
		t.Errorf("got n=%d, %v; want 10 and an error wrapping boom", n, err)
	}
	if !reflect.DeepEqual(rec.sizes, []int{10, -10}) {
		t.Errorf("send calls: got %v, want [10 -10] (one accepted, one failed, then stop)", rec.sizes)
	}
	if err != nil && (!strings.HasPrefix(err.Error(), "workload: ") || !strings.Contains(err.Error(), "lines 12-21")) {
		t.Errorf("error %q: want the package prefix and the lines of the batch (12-21)", err)
	}
}

// A malformed row stops the import with its *LineError; the batches before it were sent.
func TestImportMalformedRow(t *testing.T) {
	in := synthetic(25)
	lines := strings.Split(in, "\n")
	lines[17] = "2001-01-01T00:01:00,oops,100,LAS,PHL" // line 18
	var rec recorder
	n, err := Import(context.Background(), mustReader(t, strings.NewReader(strings.Join(lines, "\n"))), nil, 5, 0, rec.send, nil)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 18 || le.Column != "delay" {
		t.Fatalf("got %v, want a *LineError at line 18 column delay", err)
	}
	// Lines 2..17 are 16 good flights: three full batches of 5 were sent, the 16th was not.
	if n != 15 || !reflect.DeepEqual(rec.sizes, []int{5, 5, 5}) {
		t.Errorf("got n=%d, batches %v; want 15 in [5 5 5]", n, rec.sizes)
	}
}

func TestImportBadArguments(t *testing.T) {
	var rec recorder
	for _, bs := range []int{0, -1} {
		if _, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(3))), nil, bs, 0, rec.send, nil); err == nil {
			t.Errorf("batch size %d: got nil error, want an error", bs)
		}
	}
	if _, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(3))), nil, 1, 0, nil, nil); err == nil {
		t.Error("nil send: got nil error, want an error")
	}
	if _, err := Import(context.Background(), nil, nil, 1, 0, rec.send, nil); err == nil {
		t.Error("nil reader: got nil error, want an error")
	}
	if rec.sizes != nil {
		t.Errorf("send called %d times on bad arguments, want 0", len(rec.sizes))
	}
}
