package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	t.Parallel()
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
		if !assert.NoError(t, err, "%s: Import", name) {
			continue
		}
		assert.Equal(t, c.want, rec.sizes, "%s: batch sizes", name)
		total := 0
		var wantProgress []int
		for _, s := range c.want {
			total += s
			wantProgress = append(wantProgress, total)
		}
		assert.Equal(t, total, n, "%s: flights imported", name)
		assert.Len(t, rec.trips, total, "%s: trips sent", name)
		assert.Equal(t, wantProgress, progress, "%s: progress", name)
		// Every flight once, in file order: trip i is the flight of line i+2 (delay i).
		for i, tr := range rec.trips {
			m := decodeJSON(t, tr.Body)
			if !assert.True(t, m["delay"] == jsonNumber(i) && tr.ColumnKey == ColumnBase && tr.RefKey == BaseRefKey,
				"%s: trip %d: got %s/%s/%d %s, want the flight of line %d", name, i, tr.RowKey, tr.ColumnKey, tr.RefKey, tr.Body, i+2) {
				break
			}
			want := uuidV5(Namespace, fmt.Sprintf("%d|2001-01-01T00:01:00|%d|100|%s|%s", i+2, i, m["origin"], m["destination"]))
			if !assert.Equal(t, want, tr.RowKey, "%s: trip %d: row key", name, i) {
				break
			}
		}
	}
}

func jsonNumber(i int) any { return json.Number(strconv.Itoa(i)) }

// The whole sample, in batches of 1,000: every flight sent exactly once, no unknown airport.
func TestImportSample(t *testing.T) {
	t.Parallel()
	a := loadSampleAirports(t)
	var rec recorder
	calls, last := 0, 0
	st, err := ImportWithStats(context.Background(), openSample(t), a, 1000, 0, rec.send, func(done int) {
		calls++
		assert.Greater(t, done, last, "progress went from %d to %d", last, done)
		last = done
	})
	require.NoError(t, err, "ImportWithStats")
	assert.Equal(t, sampleRows, st.Flights, "flights imported")
	assert.Equal(t, sampleRows/1000, st.Batches, "batches")
	assert.Equal(t, st.Batches, calls, "progress calls: want one per batch")
	assert.Equal(t, sampleRows, last, "the last progress call")
	assert.Nil(t, st.UnknownAirports, "unknown airports")
	for i, s := range rec.sizes {
		require.Equal(t, 1000, s, "batch %d: trips", i)
	}
	flights := readAll(t, openSample(t))
	seen := make(map[uuid.UUID]bool, len(rec.trips))
	for i, tr := range rec.trips { // plain checks first: see readAll
		if seen[tr.RowKey] {
			require.Failf(t, "row key sent twice", "trip %d: row key %s sent twice", i, tr.RowKey)
		}
		seen[tr.RowKey] = true
		if tr.RowKey != flights[i].RowKey() {
			require.Equal(t, flights[i].RowKey(), tr.RowKey, "trip %d: row key of line %d", i, flights[i].Line)
		}
	}
	assert.Len(t, seen, sampleRows, "distinct row keys sent")
}

func TestImportUnknownAirports(t *testing.T) {
	t.Parallel()
	a := Airports{"LAS": {IATA: "LAS", City: "Las Vegas", State: "NV"}}
	// Rows alternate LAS->XXX, XXX->YYY, YYY->LAS over 7 rows.
	var rec recorder
	st, err := ImportWithStats(context.Background(), mustReader(t, strings.NewReader(synthetic(7, "LAS", "XXX", "YYY"))), a, 3, 0, rec.send, nil)
	require.NoError(t, err, "ImportWithStats")
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
	assert.Equal(t, want, st.UnknownAirports, "unknown airports")
	assert.Equal(t, 7, st.Flights, "flights")
	assert.Equal(t, 3, st.Batches, "batches")
}

func TestImportCancel(t *testing.T) {
	t.Parallel()
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
	assert.ErrorIs(t, err, context.Canceled, "Import after cancel")
	assert.Equal(t, 30, n, "after cancel: flights imported")
	assert.Equal(t, []int{10, 10, 10}, rec.sizes, "after cancel: batches")

	// A context done before the start sends nothing.
	rec = recorder{}
	n, err = Import(ctx, mustReader(t, strings.NewReader(synthetic(5))), nil, 10, 0, rec.send, nil)
	assert.ErrorIs(t, err, context.Canceled, "canceled before start")
	assert.Zero(t, n, "canceled before start: flights imported")
	assert.Nil(t, rec.sizes, "canceled before start: batches")

	// A context that ends while the last partial batch is being filled: that batch is dropped.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	rec = recorder{}
	calls := 0
	n, err = Import(ctx2, mustReader(t, strings.NewReader(synthetic(15))), nil, 10, 0, rec.send, func(int) {
		calls++
		cancel2()
	})
	assert.ErrorIs(t, err, context.Canceled, "canceled after the first batch")
	assert.Equal(t, 10, n, "canceled after the first batch: flights imported")
	assert.Equal(t, []int{10}, rec.sizes, "canceled after the first batch: batches")
	assert.Equal(t, 1, calls, "canceled after the first batch: progress calls")
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
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec recorder
	in := cancelAtEOF{r: strings.NewReader(synthetic(15)), cancel: cancel}
	n, err := Import(ctx, mustReader(t, in), nil, 10, 0, rec.send, nil)
	assert.ErrorIs(t, err, context.Canceled, "Import")
	assert.Equal(t, 10, n, "flights imported")
	assert.Equal(t, []int{10}, rec.sizes, "batches")
}

func TestImportSendError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	var rec recorder
	rec.fail = func(call int) error {
		if call == 1 {
			return boom
		}
		return nil
	}
	n, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(30))), nil, 10, 0, rec.send, nil)
	assert.ErrorIs(t, err, boom, "Import")
	assert.Equal(t, 10, n, "flights imported")
	assert.Equal(t, []int{10, -10}, rec.sizes, "send calls: want one accepted, one failed, then stop")
	if err != nil {
		assert.True(t, strings.HasPrefix(err.Error(), "workload: "), "error %q: want the package prefix", err)
		assert.ErrorContains(t, err, "lines 12-21", "error: want the lines of the batch")
	}
}

// A malformed row stops the import with its *LineError; the batches before it were sent.
func TestImportMalformedRow(t *testing.T) {
	t.Parallel()
	in := synthetic(25)
	lines := strings.Split(in, "\n")
	lines[17] = "2001-01-01T00:01:00,oops,100,LAS,PHL" // line 18
	var rec recorder
	n, err := Import(context.Background(), mustReader(t, strings.NewReader(strings.Join(lines, "\n"))), nil, 5, 0, rec.send, nil)
	var le *LineError
	require.ErrorAs(t, err, &le, "Import: want a *LineError at line 18 column delay")
	require.Equal(t, 18, le.Line, "line of the error")
	require.Equal(t, "delay", le.Column, "column of the error")
	// Lines 2..17 are 16 good flights: three full batches of 5 were sent, the 16th was not.
	assert.Equal(t, 15, n, "flights imported")
	assert.Equal(t, []int{5, 5, 5}, rec.sizes, "batches")
}

func TestImportBadArguments(t *testing.T) {
	t.Parallel()
	var rec recorder
	for _, bs := range []int{0, -1} {
		_, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(3))), nil, bs, 0, rec.send, nil)
		assert.Error(t, err, "batch size %d", bs)
	}
	_, err := Import(context.Background(), mustReader(t, strings.NewReader(synthetic(3))), nil, 1, 0, nil, nil)
	assert.Error(t, err, "nil send")
	_, err = Import(context.Background(), nil, nil, 1, 0, rec.send, nil)
	assert.Error(t, err, "nil reader")
	assert.Nil(t, rec.sizes, "send calls on bad arguments: want none")
}
