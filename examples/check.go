package examples

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schemaless-db/schemaless/cells"
	"github.com/schemaless-db/schemaless/client"
	"github.com/schemaless-db/schemaless/workload"
)

// TriggerCheck counts, over the flights checked, the output cells of the example groups: STATUS
// cells missing or with another body than BillingBody's, FARE_ADJUSTMENT cells expected (a delay
// over CompensationDelayMinutes), missing, unexpected or wrong. FirstProblem describes the first
// problem found ("" when none).
type TriggerCheck struct {
	Flights                                         int
	StatusMissing, StatusWrong                      int
	AdjustExpected, AdjustMissing, AdjustUnexpected int
	AdjustWrong                                     int
	FirstProblem                                    string
}

// OK reports whether no problem was found.
func (c TriggerCheck) OK() bool {
	return c.StatusMissing == 0 && c.StatusWrong == 0 && c.AdjustMissing == 0 && c.AdjustUnexpected == 0 && c.AdjustWrong == 0
}

// Print writes the check's line (and its first problem's) to w; el is the check's duration.
func (c TriggerCheck) Print(w io.Writer, el time.Duration) {
	fmt.Fprintf(w, "trigger check of %d flights in %.1fs: STATUS missing %d, wrong %d; FARE_ADJUSTMENT %d expected (delay > %d min), missing %d, unexpected %d, wrong %d\n",
		c.Flights, el.Seconds(), c.StatusMissing, c.StatusWrong, c.AdjustExpected, CompensationDelayMinutes, c.AdjustMissing, c.AdjustUnexpected, c.AdjustWrong)
	if c.FirstProblem != "" {
		fmt.Fprintf(w, "  first problem: %s\n", c.FirstProblem)
	}
}

// CheckTriggerCells reads the STATUS and FARE_ADJUSTMENT cells of the first limit flights of path
// (0: all; airports from airportsPath), 200 flights per strong batch get, and compares them with
// the bodies the handlers derive from the flight's BASE body. It fails on a file it cannot read
// or a read that fails.
func CheckTriggerCells(ctx context.Context, cl *client.Client, path, airportsPath string, limit int) (TriggerCheck, error) {
	var chk TriggerCheck
	r, airports, closeFile, err := OpenFlights(path, airportsPath)
	if err != nil {
		return chk, err
	}
	defer closeFile()
	problem := func(format string, args ...any) {
		if chk.FirstProblem == "" {
			chk.FirstProblem = fmt.Sprintf(format, args...)
		}
	}
	_, err = workload.Import(ctx, r, airports, 200, limit, func(ctx context.Context, b []workload.Trip) error {
		keys := make([]client.GetKey, 0, 2*len(b))
		wantStatus := make(map[string][]byte, len(b))
		wantAdjust := make(map[string][]byte, len(b))
		for _, t := range b {
			body, err := cells.EncodeBody(t.Body)
			if err != nil {
				return err
			}
			base, err := body.Object()
			if err != nil {
				return err
			}
			rk := t.RowKey.String()
			if wantStatus[rk], err = BillingBody(base); err != nil {
				return fmt.Errorf("%s: %w", rk, err)
			}
			adj, ok, err := CompensationBody(base)
			if err != nil {
				return fmt.Errorf("%s: %w", rk, err)
			}
			if ok {
				wantAdjust[rk] = adj
				chk.AdjustExpected++
			}
			keys = append(keys, client.GetKey{RowKey: t.RowKey, ColumnKey: ColumnStatus, RefKey: t.RefKey},
				client.GetKey{RowKey: t.RowKey, ColumnKey: ColumnFareAdjustment, RefKey: t.RefKey})
		}
		chk.Flights += len(b)
		resp, err := cl.GetCells(ctx, keys, client.WithConsistency(client.ConsistencyStrong))
		if err != nil {
			return err
		}
		gotAdjust := map[string]bool{}
		for _, c := range resp.Cells {
			rk := strings.ToLower(c.RowKey)
			switch c.ColumnKey {
			case ColumnStatus:
				if err := SameJSON(c.Body, wantStatus[rk]); err != nil {
					chk.StatusWrong++
					problem("%s/%s: %v", rk, c.ColumnKey, err)
				}
			case ColumnFareAdjustment:
				gotAdjust[rk] = true
				want, ok := wantAdjust[rk]
				if !ok {
					chk.AdjustUnexpected++
					problem("%s/%s: unexpected %s", rk, c.ColumnKey, c.Body)
				} else if err := SameJSON(c.Body, want); err != nil {
					chk.AdjustWrong++
					problem("%s/%s: %v", rk, c.ColumnKey, err)
				}
			}
		}
		for _, m := range resp.Missing {
			if m.ColumnKey == ColumnStatus {
				chk.StatusMissing++
				problem("%s/%s missing", m.RowKey, m.ColumnKey)
			}
		}
		for rk := range wantAdjust {
			if !gotAdjust[rk] {
				chk.AdjustMissing++
				problem("%s/%s missing", rk, ColumnFareAdjustment)
			}
		}
		return nil
	}, nil)
	return chk, err
}
