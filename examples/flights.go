package examples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/wire"
	"github.com/schemaless-db/schemaless/workload"
)

// ErrImportOptions: Import's batch or concurrency is not positive.
var ErrImportOptions = errors.New("examples: import batch and concurrency must be positive")

// OpenFlights opens the flights file at path (.csv or .csv.gz) and loads the airports file at
// airportsPath. The caller must call the returned function to close the file. A failure to
// open the airports file is reported as "--airports: ..." (every command that reads flights has
// that flag).
func OpenFlights(path, airportsPath string) (*workload.Reader, workload.Airports, func(), error) {
	af, err := os.Open(airportsPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--airports: %w", err)
	}
	airports, err := workload.LoadAirports(af)
	af.Close()
	if err != nil {
		return nil, nil, nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := workload.NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	return r, airports, func() { f.Close() }, nil
}

// ReadFlights returns the first limit flights of path (0: all), with airports from airportsPath.
func ReadFlights(path, airportsPath string, limit int) ([]workload.Flight, error) {
	r, _, closeFile, err := OpenFlights(path, airportsPath)
	if err != nil {
		return nil, err
	}
	defer closeFile()
	var out []workload.Flight
	for {
		fl, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, fl)
		if limit > 0 && len(out) >= limit {
			return out, nil
		}
	}
}

// ImportOptions are the settings of Import.
type ImportOptions struct {
	// Batch is the cells per put_cells request, Concurrency the requests in flight; both
	// positive.
	Batch, Concurrency int
	// Limit is the most flights imported; 0 imports every one.
	Limit int
	// Progress, when not nil, is called with the cells of each request answered, from the
	// sending goroutines (concurrently).
	Progress func(cells int)
}

// ImportStats are the figures of an import: Flights written (Created new, Exists already there,
// Buffered in async mode while a primary master was down, Conflicts holding another body) in
// Elapsed, and the distinct airport codes not in the airports file.
type ImportStats struct {
	Flights, Created, Exists, Buffered, Conflicts int64
	Elapsed                                       time.Duration
	UnknownAirports                               int
}

// Import writes the flights of r as trips (one BASE cell each, see package workload) through cl:
// put_cells of opts.Batch flights, opts.Concurrency requests in flight. It blocks until every
// flight is answered, a request fails (that error is returned, with the figures so far) or ctx
// ends. It fails with ErrImportOptions on a batch or concurrency that is not positive.
func Import(ctx context.Context, cl *client.Client, r *workload.Reader, airports workload.Airports, opts ImportOptions) (ImportStats, error) {
	if opts.Batch < 1 || opts.Concurrency < 1 {
		return ImportStats{}, ErrImportOptions
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var st ImportStats
	batches := make(chan []workload.Trip)
	var wg sync.WaitGroup
	var firstErr error
	var errOnce sync.Once
	for i := 0; i < opts.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				if err := putTrips(ctx, cl, b, &st); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					continue
				}
				if opts.Progress != nil {
					opts.Progress(len(b))
				}
			}
		}()
	}
	start := time.Now()
	stats, err := workload.ImportWithStats(ctx, r, airports, opts.Batch, opts.Limit, func(ctx context.Context, b []workload.Trip) error {
		select {
		case batches <- b:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, nil)
	close(batches)
	wg.Wait()
	st.Elapsed = time.Since(start)
	st.UnknownAirports = len(stats.UnknownAirports)
	if firstErr != nil {
		return st, firstErr
	}
	if err != nil {
		return st, err
	}
	st.Flights = st.Created + st.Exists + st.Buffered + st.Conflicts
	return st, nil
}

// ImportFlights is Import of the flights file at path, with airports from airportsPath
// (OpenFlights).
func ImportFlights(ctx context.Context, cl *client.Client, path, airportsPath string, opts ImportOptions) (ImportStats, error) {
	if opts.Batch < 1 || opts.Concurrency < 1 {
		return ImportStats{}, ErrImportOptions
	}
	r, airports, closeFile, err := OpenFlights(path, airportsPath)
	if err != nil {
		return ImportStats{}, err
	}
	defer closeFile()
	return Import(ctx, cl, r, airports, opts)
}

func putTrips(ctx context.Context, cl *client.Client, b []workload.Trip, st *ImportStats) error {
	ws := make([]client.CellWrite, len(b))
	for i, t := range b {
		ws[i] = client.CellWrite{Key: t.Key(), Body: json.RawMessage(t.Body)}
	}
	res, err := cl.PutCells(ctx, ws)
	if err != nil {
		return err
	}
	for _, r := range res {
		switch r.Status {
		case wire.StatusCreated:
			atomic.AddInt64(&st.Created, 1)
		case wire.StatusExists:
			atomic.AddInt64(&st.Exists, 1)
		case wire.StatusBuffered:
			atomic.AddInt64(&st.Buffered, 1)
		default:
			atomic.AddInt64(&st.Conflicts, 1)
		}
	}
	return nil
}

// SameJSON checks that two JSON objects hold the same value as cell bodies (cells.SameBody of
// their stored forms), and returns an error showing both when they do not.
func SameJSON(got, want []byte) error {
	g, err := cells.EncodeBody(got)
	if err != nil {
		return err
	}
	w, err := cells.EncodeBody(want)
	if err != nil {
		return err
	}
	if ok, err := cells.SameBody(g, w); err != nil || !ok {
		return fmt.Errorf("body %s, want %s", got, want)
	}
	return nil
}
