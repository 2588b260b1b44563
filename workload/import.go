package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ImportStats is what ImportWithStats reports. All counts are of flights whose batch send
// accepted (returned nil).
type ImportStats struct {
	// Flights is the number of flights sent.
	Flights int
	// Batches is the number of calls to send that returned nil.
	Batches int
	// UnknownAirports maps each airport code that the Airports did not hold to the number of
	// flight ends (origin or destination) that used it; those got "" as city and state. Nil when
	// every code was known.
	UnknownAirports map[string]int
}

// Import is ImportWithStats returning only the number of flights sent (ImportStats.Flights): the
// same batching, blocking and errors.
func Import(ctx context.Context, r *Reader, a Airports, batchSize int, limit int,
	send func(ctx context.Context, batch []Trip) error, progress func(done int)) (n int, err error) {
	st, err := ImportWithStats(ctx, r, a, batchSize, limit, send, progress)
	return st.Flights, err
}

// ImportWithStats reads flights from r, turns each into its BASE trip (Flight.BaseTrip with a),
// and calls send with batches of batchSize trips in file order: every full batch, then the last
// partial one. It reads until r's end or, when limit > 0, until it has read limit flights. It
// returns when all is sent, or at the first error.
//
// It is a plain sequential loop: send is called from the calling goroutine, one batch at a time,
// and the next batch is read only after send returns. Running batches concurrently is the
// caller's business: each batch is a new slice that Import never touches again once passed to
// send, so send may hand it to another goroutine and return, but then it is the caller who must
// wait for those and account for their failures (ImportStats counts a batch as sent when send returns
// nil). If progress is not nil it is called after each successful send, on the calling
// goroutine, with the number of flights sent so far.
//
// Errors, after which nothing more is sent:
//   - batchSize < 1 or send nil: an error before anything is read;
//   - ctx done (checked before reading each flight and before each send): an error wrapping
//     ctx.Err(); the unsent partial batch is dropped;
//   - r.Next fails (a *LineError for a bad row, or an I/O error): that error; the partial batch
//     before the bad row is not sent;
//   - send fails: its error wrapped with the batch's size and lines; the batch does not count.
//
// Trips are idempotent (a re-sent BASE cell with the same body is an "exists", not a conflict),
// so the whole import may be retried after any error.
func ImportWithStats(ctx context.Context, r *Reader, a Airports, batchSize int, limit int,
	send func(ctx context.Context, batch []Trip) error, progress func(done int)) (ImportStats, error) {
	var st ImportStats
	if batchSize < 1 {
		return st, fmt.Errorf("workload: batch size %d, want at least 1", batchSize)
	}
	if send == nil {
		return st, errors.New("workload: import: send is nil")
	}
	if r == nil {
		return st, errors.New("workload: import: reader is nil")
	}
	var (
		batch   []Trip
		unknown []string // unknown codes of the flights in batch
		first   int      // line of batch[0]
		read    int      // flights read
	)
	flush := func() error {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("workload: import stopped after %d flights: %w", st.Flights, err)
		}
		if err := send(ctx, batch); err != nil {
			return fmt.Errorf("workload: send batch of %d trips (lines %d-%d): %w", len(batch), first, first+len(batch)-1, err)
		}
		st.Flights += len(batch)
		st.Batches++
		for _, code := range unknown {
			if st.UnknownAirports == nil {
				st.UnknownAirports = make(map[string]int)
			}
			st.UnknownAirports[code]++
		}
		batch, unknown = nil, unknown[:0]
		if progress != nil {
			progress(st.Flights)
		}
		return nil
	}
	for limit <= 0 || read < limit {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("workload: import stopped after %d flights: %w", st.Flights, err)
		}
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return st, err
		}
		read++
		t, err := f.BaseTrip(a)
		if err != nil {
			return st, err
		}
		if batch == nil {
			batch = make([]Trip, 0, batchSize)
			first = f.Line
		}
		batch = append(batch, t)
		if _, ok := a[f.Origin]; !ok {
			unknown = append(unknown, f.Origin)
		}
		if _, ok := a[f.Destination]; !ok {
			unknown = append(unknown, f.Destination)
		}
		if len(batch) == batchSize {
			if err := flush(); err != nil {
				return st, err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return st, err
		}
	}
	return st, nil
}
