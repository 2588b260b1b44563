package examples

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/workload"
)

// readBackBatch is the keys per batch get of VerifyFlights; readBackRetry the pause between
// two attempts of ReadBack's stale read-back.
const (
	readBackBatch = 200
	readBackRetry = 200 * time.Millisecond
)

// Print writes the import's figures to w, each line after prefix: flights, time, rate and
// outcomes, then the buffered flights and the unknown airport codes when there are any.
func (s ImportStats) Print(w io.Writer, prefix string) {
	fmt.Fprintf(w, "%simported %d flights in %.1fs: %.0f cells/s (%d created, %d exists, %d conflicts)\n",
		prefix, s.Flights, s.Elapsed.Seconds(), float64(s.Flights)/s.Elapsed.Seconds(), s.Created, s.Exists, s.Conflicts)
	if s.Buffered > 0 {
		fmt.Fprintf(w, "%s%d flights were buffered (async mode, a primary master was down): durable, readable once replayed\n", prefix, s.Buffered)
	}
	if s.UnknownAirports > 0 {
		fmt.Fprintf(w, "%s  %d airport codes were not in the airports file (empty city and state)\n", prefix, s.UnknownAirports)
	}
}

// VerifyFlights reads the BASE cell of each of the first limit flights of path (0: all;
// airports from airportsPath) back through cl, 200 keys per batch get at consistency, and
// checks each body against the one Import wrote (SameJSON). It returns the cells read and
// checked; the first missing cell or different body is an error, as is a read that fails.
func VerifyFlights(ctx context.Context, cl *client.Client, path, airportsPath string, limit int, consistency string) (int, error) {
	r, airports, closeFile, err := OpenFlights(path, airportsPath)
	if err != nil {
		return 0, err
	}
	defer closeFile()
	n := 0
	_, err = workload.Import(ctx, r, airports, readBackBatch, limit, func(ctx context.Context, b []workload.Trip) error {
		keys := make([]client.GetKey, len(b))
		want := map[string][]byte{}
		for i, t := range b {
			keys[i] = client.GetKey{RowKey: t.RowKey, ColumnKey: t.ColumnKey, RefKey: t.RefKey}
			want[t.RowKey.String()] = t.Body
		}
		resp, err := cl.GetCells(ctx, keys, client.WithConsistency(consistency))
		if err != nil {
			return err
		}
		if len(resp.Missing) > 0 {
			return fmt.Errorf("read back: %d of %d cells missing, first %s/%s", len(resp.Missing), len(b), resp.Missing[0].RowKey, resp.Missing[0].ColumnKey)
		}
		for _, c := range resp.Cells {
			if err := SameJSON(c.Body, want[c.RowKey]); err != nil {
				return fmt.Errorf("read back %s: %w", c.RowKey, err)
			}
			n++
		}
		return nil
	}, nil)
	return n, err
}

// ReadBack reads the first limit flights of path (0: all; airports from airportsPath) back
// after an import, strong then stale (VerifyFlights), and writes one line for each to w after
// prefix: the cells read, the time and the rate. A stale read-back that fails is tried again
// every 200 ms for up to staleWait (0: once), since replicas may trail the leader (or the
// master), and its line says how many attempts found them behind; a stale read-back that
// still fails is a line, not an error. A strong read-back that fails is the error returned
// ("verify: ...").
func ReadBack(ctx context.Context, cl *client.Client, path, airportsPath string, limit int, staleWait time.Duration, w io.Writer, prefix string) error {
	for _, c := range []string{client.ConsistencyStrong, client.ConsistencyStale} {
		first, start := time.Now(), time.Now()
		n, err := VerifyFlights(ctx, cl, path, airportsPath, limit, c)
		attempts := 1
		for ; err != nil && c == client.ConsistencyStale && time.Since(first) < staleWait && ctx.Err() == nil; attempts++ {
			select {
			case <-ctx.Done():
			case <-time.After(readBackRetry):
			}
			start = time.Now()
			n, err = VerifyFlights(ctx, cl, path, airportsPath, limit, c)
		}
		if err != nil && c == client.ConsistencyStrong {
			return fmt.Errorf("%sverify: %w", prefix, err)
		}
		if err != nil {
			fmt.Fprintf(w, "%sread back (%s): %v\n", prefix, c, err)
			continue
		}
		el, lag := time.Since(start), ""
		if attempts > 1 {
			plural := "s"
			if attempts == 2 {
				plural = ""
			}
			lag = fmt.Sprintf(" (%d earlier attempt%s in %.1fs found replicas behind)", attempts-1, plural, start.Sub(first).Seconds())
		}
		fmt.Fprintf(w, "%sread back %d cells (%s) in %.1fs: %.0f cells/s, every body as written%s\n", prefix, n, c, el.Seconds(), float64(n)/el.Seconds(), lag)
	}
	return nil
}

// CountFlights counts the flights of a flights file (plain or gzip-compressed CSV): its lines
// but the header, a last line without a newline included. It reads the whole file (0.4 s for 3
// million flights), for a progress bar's total.
func CountFlights(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return 0, err
		}
		defer gz.Close()
		r = gz
	}
	buf := make([]byte, 1<<16)
	lines, last := 0, byte('\n')
	for {
		n, err := r.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if n > 0 {
			last = buf[n-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		lines++ // a last line without a newline
	}
	return max(lines-1, 0), nil // minus the header
}
